import { setImmediate as nextTurn } from 'node:timers/promises';

/**
 * Gives the event loop back, now and then, to a long run of synchronous work
 * done item by item (compiling the schemas of a large tool list): calls and
 * timers get their turn between items instead of after the whole run. What
 * the work computes does not depend on where it paused.
 */
export class LoopSlice {
  readonly #sliceMs: number;
  #since = performance.now();

  /** @param sliceMs how long the work may hold the loop before it pauses. @defaultValue 10 */
  constructor(sliceMs = 10) {
    this.#sliceMs = sliceMs;
  }

  /** Resolves at once while the slice lasts; past it, after one turn of the event loop. */
  async pause(): Promise<void> {
    if (performance.now() - this.#since < this.#sliceMs) return;
    await nextTurn();
    this.#since = performance.now();
  }
}
