/** Most calls one batched script run takes: keeps a single run (which blocks Redis) short. */
const MAX_STEPS = 128;

interface Waiter<R> {
  readonly resolve: (reply: R) => void;
  readonly reject: (error: unknown) => void;
}

/** Runs a step's script for one call or for many: keys and arguments as `batchScript` takes them. */
export type StepSender<R> = (keys: readonly string[], args: readonly (string | number)[]) => Promise<R>;

/**
 * Coalesces the same call-state step (start, finish) asked for by many calls
 * in one event-loop turn into one run of its batched script (see
 * `batchScript`). A worker running a batch job starts its calls together and
 * finishes them as their results come back together; one EVALSHA for all of
 * them costs Redis and this process far less than one per call. Each call
 * still gets its own reply, or its own error.
 *
 * A step asked for while none is waiting or in flight is alone: a worker
 * that is idle, or nearly so, has nothing to coalesce it with. It goes out at
 * once through `now` instead of at the end of the turn. On a worker's hot
 * path that is what puts a lone call's `start` ahead of the fetch BullMQ
 * sends as soon as the processor yields (two turns later, through the
 * auto-pipeline, the start waited for that fetch's round trip and Redis ran
 * the fetch's script first), and a `finish` out in the turn its result came.
 */
export class StepBatch<R> {
  #keys: string[] = [];
  #args: (string | number)[] = [];
  #waiters: Waiter<R>[] = [];
  /** Script runs sent and not answered yet. */
  #inFlight = 0;
  readonly #settled = (): void => {
    this.#inFlight--;
  };

  /**
   * @param one runs the plain script for one call (on the auto-pipeline)
   * @param many runs the batched script
   * @param now runs the plain script for one call, written to the connection at once
   */
  constructor(
    private readonly one: StepSender<R>,
    private readonly many: StepSender<unknown[]>,
    private readonly now: StepSender<R> = one,
  ) {}

  run(keys: readonly string[], args: readonly (string | number)[]): Promise<R> {
    if (this.#waiters.length === 0 && this.#inFlight === 0) return this.#track(this.now(keys, args));
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

  #track<T>(sent: Promise<T>): Promise<T> {
    this.#inFlight++;
    sent.then(this.#settled, this.#settled);
    return sent;
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
      this.#track(this.one(keys, args.slice(2, 2 + argCount))).then(waiters[0]!.resolve, waiters[0]!.reject);
      return;
    }
    this.#track(this.many(keys, args)).then(
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
