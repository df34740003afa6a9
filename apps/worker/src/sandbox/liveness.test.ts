import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { BUSY_CPU_SHARE, checkLivenessLimits, isFrozen, LivenessCheck } from './liveness.js';

describe('isFrozen', () => {
  it('is true for a silent process that used next to no CPU, or whose CPU cannot be read', () => {
    expect(isFrozen(2000, 0)).toBe(true);
    expect(isFrozen(2000, 2 * BUSY_CPU_SHARE - 0.01)).toBe(true);
    expect(isFrozen(2000, undefined)).toBe(true);
  });

  it('is false for one that was computing: that is the CPU limit\'s business', () => {
    expect(isFrozen(2000, 1.9)).toBe(false);
    expect(isFrozen(2000, 2 * BUSY_CPU_SHARE)).toBe(false);
  });
});

describe('checkLivenessLimits', () => {
  it('accepts the defaults and refuses an interval below 10 ms or a timeout not above the interval', () => {
    expect(() => checkLivenessLimits({ livenessIntervalMs: 500, livenessTimeoutMs: 2000 })).not.toThrow();
    expect(() => checkLivenessLimits({ livenessIntervalMs: 5, livenessTimeoutMs: 2000 })).toThrow(/livenessIntervalMs/);
    expect(() => checkLivenessLimits({ livenessIntervalMs: 500, livenessTimeoutMs: 400 })).toThrow(/livenessTimeoutMs/);
  });
});

describe('LivenessCheck', () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval', 'setImmediate', 'performance'] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  function check(cpu: () => number | undefined = () => 0) {
    const pings: number[] = [];
    const frozen: number[] = [];
    const liveness = new LivenessCheck({ livenessIntervalMs: 100, livenessTimeoutMs: 300, ping: (seq) => pings.push(seq), cpuSeconds: cpu, onFrozen: (ms) => frozen.push(ms) });
    return { liveness, pings, frozen };
  }

  it('pings while started and never finds a process that answers frozen', () => {
    const { liveness, pings, frozen } = check();
    liveness.start();
    for (let i = 0; i < 20; i++) {
      vi.advanceTimersByTime(100);
      liveness.pong(pings[pings.length - 1] ?? 0);
    }
    expect(pings.length).toBe(20);
    expect(frozen).toEqual([]);
    liveness.stop();
  });

  it('finds a silent process at zero CPU frozen once, after its timeout, and stops', () => {
    const { liveness, pings, frozen } = check();
    liveness.start();
    vi.advanceTimersByTime(1000);
    expect(pings).toEqual([1]);
    expect(frozen).toHaveLength(1);
    expect(frozen[0]).toBeGreaterThanOrEqual(300);
    vi.advanceTimersByTime(1000);
    expect(frozen).toHaveLength(1);
  });

  it('leaves a silent process that keeps using CPU alone, and finds it frozen once it stops computing', () => {
    let cpu = 0;
    const { liveness, frozen } = check(() => cpu);
    liveness.start();
    // Computing flat out for 2 s without answering.
    for (let i = 0; i < 20; i++) {
      cpu += 0.1;
      vi.advanceTimersByTime(100);
    }
    expect(frozen).toEqual([]);
    // Then blocked: its CPU time stands still.
    vi.advanceTimersByTime(1000);
    expect(frozen).toHaveLength(1);
  });

  it('forgets an unanswered ping when stopped: an idle process is not watched', () => {
    const { liveness, frozen } = check();
    liveness.start();
    vi.advanceTimersByTime(100);
    liveness.stop();
    vi.advanceTimersByTime(1000);
    expect(frozen).toEqual([]);
  });
});
