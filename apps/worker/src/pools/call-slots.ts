/**
 * The worker's call slots: at most `limit` calls run at once (`--concurrency`
 * bounds calls, not jobs: a batch job's calls share these slots); the rest
 * wait their turn in order.
 */
export class CallSlots {
  #free: number;
  readonly #waiting: (() => void)[] = [];

  constructor(limit: number) {
    this.#free = limit;
  }

  /** Slots no call holds or waits for. */
  get spare(): number {
    return this.#free - this.#waiting.length;
  }

  /** Runs `task` in a slot, once one is free; `onSlot` is told when it got one. */
  async run<T>(task: () => Promise<T>, onSlot?: () => void): Promise<T> {
    if (this.#free > 0) this.#free--;
    else await new Promise<void>((resolve) => this.#waiting.push(resolve));
    onSlot?.();
    try {
      return await task();
    } finally {
      const next = this.#waiting.shift();
      if (next === undefined) this.#free++;
      else next();
    }
  }
}
