import { describe, expect, it } from 'vitest';
import { FreshRun } from './fresh-run.js';

/** A task whose runs end when told, and which records what each run saw. */
function gatedTask() {
  let state = 0;
  const seen: number[] = [];
  const gates: (() => void)[] = [];
  const run = new FreshRun(async () => {
    const at = state;
    await new Promise<void>((resolve) => gates.push(resolve));
    seen.push(at);
    return at;
  });
  return { run, seen, write: () => ++state, release: () => gates.shift()?.() };
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe('FreshRun', () => {
  it('gives a caller who comes during a run the run after it, shared by all who came meanwhile', async () => {
    const t = gatedTask();
    const first = t.run.run();
    t.write();
    const second = t.run.run();
    const third = t.run.run();
    expect(third).toBe(second);
    t.release();
    expect(await first).toBe(0);
    await tick();
    t.release();
    // The run the late callers got read the state after their write.
    expect(await second).toBe(1);
    expect(t.seen).toEqual([0, 1]);
  });

  it('shares a run under way with a caller who asked before it began', async () => {
    const t = gatedTask();
    const asked = performance.now();
    await new Promise((resolve) => setTimeout(resolve, 2));
    const running = t.run.run();
    expect(t.run.run(asked)).toBe(running);
    expect(t.run.startedAt).toBeGreaterThan(asked);
    t.release();
    await running;
    expect(t.seen).toEqual([0]);
  });

  it('gives the callers waiting on a failed run a run of their own, and the failure to its own callers', async () => {
    let calls = 0;
    const run = new FreshRun(async () => {
      calls++;
      await tick();
      if (calls === 1) throw new Error('first run failed');
      return calls;
    });
    const first = run.run();
    const second = run.run();
    await expect(first).rejects.toThrow('first run failed');
    expect(await second).toBe(2);
    // Idle again: the next caller starts a run.
    expect(await run.run()).toBe(3);
  });
});
