/** Most calls one batched script run takes: keeps a single run (which blocks Redis) short. */
const MAX_STEPS = 128;

interface Waiter<R> {
  readonly resolve: (reply: R) => void;
  readonly reject: (error: unknown) => void;
}

/**
 * Coalesces the same call-state step (start, finish) asked for by many calls
 * in one event-loop turn into one run of its batched script (see
 * `batchScript`). A worker running a batch job starts its calls together and
 * finishes them as their results come back together; one EVALSHA for all of
 * them costs Redis and this process far less than one per call. Each call
 * still gets its own reply, or its own error.
 */
export class StepBatch<R> {
  #keys: string[] = [];
  #args: (string | number)[] = [];
  #waiters: Waiter<R>[] = [];

  constructor(
    private readonly one: (keys: readonly string[], args: readonly (string | number)[]) => Promise<R>,
    private readonly many: (keys: readonly string[], args: readonly (string | number)[]) => Promise<unknown[]>,
  ) {}

  run(keys: readonly string[], args: readonly (string | number)[]): Promise<R> {
    // Flushed at the end of this event-loop iteration: every I/O callback of its poll phase (a sandbox's
    // results, a Redis reply, another sandbox's results) adds its calls' steps to the same run.
    if (this.#waiters.length === 0) setImmediate(() => this.#flush());
    for (const key of keys) this.#keys.push(key);
    this.#args.push(keys.length, args.length);
    for (const arg of args) this.#args.push(arg);
    const reply = new Promise<R>((resolve, reject) => this.#waiters.push({ resolve, reject }));
    if (this.#waiters.length >= MAX_STEPS) this.#flush();
    return reply;
  }

  #flush(): void {
    const waiters = this.#waiters;
    if (waiters.length === 0) return; // already flushed (a full batch)
    const keys = this.#keys;
    const args = this.#args;
    this.#keys = [];
    this.#args = [];
    this.#waiters = [];
    if (waiters.length === 1) {
      // A lone step runs as the plain script: the same effect, and what MONITOR shows stays readable.
      const [, argCount] = args as [number, number];
      this.one(keys, args.slice(2, 2 + argCount)).then(waiters[0]!.resolve, waiters[0]!.reject);
      return;
    }
    this.many(keys, args).then(
      (replies) => {
        waiters.forEach((w, i) => {
          const reply = replies[i];
          if (reply instanceof Error) w.reject(reply);
          else w.resolve(reply as R);
        });
      },
      (error: unknown) => {
        for (const w of waiters) w.reject(error);
      },
    );
  }
}
