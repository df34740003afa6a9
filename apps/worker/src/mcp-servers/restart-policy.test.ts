import { describe, expect, it } from 'vitest';
import { isCrashLoop, restartDelayMs, type RestartSettings } from './restart-policy.js';

const restart: RestartSettings = { initialDelayMs: 100, maxDelayMs: 1_000, stableAfterMs: 10_000, crashLoopFailures: 3, crashLoopWindowMs: 60_000 };

describe('restartDelayMs', () => {
  it('is zero with no failure, then doubles from the initial delay up to the cap', () => {
    expect([0, 1, 2, 3, 4, 5, 100].map((n) => restartDelayMs(n, restart))).toEqual([0, 100, 200, 400, 800, 1_000, 1_000]);
  });
});

describe('isCrashLoop', () => {
  it('counts only the failures inside the window', () => {
    const now = 1_000_000;
    expect(isCrashLoop([now - 70_000, now - 1, now], now, restart)).toBe(false);
    expect(isCrashLoop([now - 59_000, now - 1, now], now, restart)).toBe(true);
  });
});
