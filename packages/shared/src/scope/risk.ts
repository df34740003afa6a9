/** A sign that an agent may be misbehaving (prompt injection, confused task routing…). */
export interface RiskSignal {
  readonly kind: 'out_of_scope' | 'forged_call';
  readonly at: string;
  readonly callId: string;
  readonly tool: string;
  readonly scope: string;
  readonly caller?: string;
  readonly reason?: string;
}

/** Where risk signals go, to be weighed by whatever watches the agents. `push` must not throw. */
export interface RiskSignalQueue {
  push(signal: RiskSignal): void;
}

/**
 * An in-memory signal queue that keeps the newest `capacity` signals, so a
 * flood of rejected calls cannot grow memory without bound.
 */
export class MemoryRiskSignalQueue implements RiskSignalQueue {
  readonly #items: RiskSignal[] = [];
  #dropped = 0;

  /** @param capacity signals kept. @defaultValue 1000 */
  constructor(readonly capacity = 1000) {}

  push(signal: RiskSignal): void {
    this.#items.push(signal);
    if (this.#items.length > this.capacity) {
      this.#items.shift();
      this.#dropped++;
    }
  }

  /** The signals kept, oldest first. */
  get signals(): readonly RiskSignal[] {
    return this.#items;
  }

  /** How many old signals were dropped to stay within capacity. */
  get dropped(): number {
    return this.#dropped;
  }

  /** Removes and returns every signal kept. */
  drain(): RiskSignal[] {
    return this.#items.splice(0);
  }
}
