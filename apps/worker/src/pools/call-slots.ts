/**
 * The worker's call slots: at most `limit` calls run at once (`--concurrency`
 * bounds calls, not jobs: a batch job's calls share these slots); the rest
 * wait their turn in order. A worker that stops gives up the calls still
 * waiting for a slot (see drain): none of them has started.
 */
export class CallSlots {
  #free: number;
  readonly #waiting: ((granted: boolean) => void)[] = [];

  constructor(limit: number) {
    this.#free = limit;
  }

  /** Slots no call holds or waits for. */
  get spare(): number {
    return this.#free - this.#waiting.length;
  }

  /**
   * Runs `task` in a slot, once one is free; `onSlot` is told when it got one. A call still waiting when the slots
   * are drained runs `otherwise` instead, holding no slot.
   */
  async run<T>(task: () => Promise<T>, onSlot: () => void, otherwise: () => Promise<T>): Promise<T> {
    if (this.#free > 0) this.#free--;
    else if (!(await new Promise<boolean>((resolve) => this.#waiting.push(resolve)))) return otherwise();
    onSlot();
    try {
      return await task();
    } finally {
      const next = this.#waiting.shift();
      if (next === undefined) this.#free++;
      else next(true);
    }
  }

  /** Every call waiting for a slot runs its `otherwise` now (a stopping worker hands them back). */
  drain(): void {
    for (const waiting of this.#waiting.splice(0)) waiting(false);
  }
}
