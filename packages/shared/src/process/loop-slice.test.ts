import { describe, expect, it } from 'vitest';
import { LoopSlice } from './loop-slice.js';

/** Holds the loop for `ms`, as compiling a schema does. */
function busy(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end);
}

describe('LoopSlice', () => {
  it('lets other work run between items once a slice is spent, and not before', async () => {
    const slice = new LoopSlice(5);
    let ranBetween = false;
    setImmediate(() => (ranBetween = true));
    await slice.pause();
    // Within the slice: no turn of the loop was given.
    expect(ranBetween).toBe(false);
    busy(6);
    await slice.pause();
    expect(ranBetween).toBe(true);
  });
});
