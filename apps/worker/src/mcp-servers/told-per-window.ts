/**
 * How a server's chatter reaches the worker's log at a bounded rate: at most
 * `max` events a window are told, the others only counted. The count is told
 * before the next event told (after the window ended), or by {@link drain} at
 * the end, so an operator learns how much was left out without the log paying
 * for each line. One rule for stderr lines and for unreadable stdout lines.
 */
export class ToldPerWindow {
  #start = Number.NEGATIVE_INFINITY;
  #told = 0;
  #dropped = 0;

  constructor(
    private readonly max: number,
    private readonly windowMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * `'drop'` for an event not to tell; otherwise how many were dropped since
   * the last one told (to be told first, as one count).
   */
  take(): number | 'drop' {
    const now = this.now();
    if (now - this.#start >= this.windowMs) {
      this.#start = now;
      this.#told = 0;
    }
    if (this.#told >= this.max) {
      this.#dropped += 1;
      return 'drop';
    }
    this.#told += 1;
    return this.drain();
  }

  /** How many were dropped and not yet told; they count as told now. */
  drain(): number {
    const dropped = this.#dropped;
    this.#dropped = 0;
    return dropped;
  }
}
