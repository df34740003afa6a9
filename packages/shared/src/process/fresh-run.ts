/**
 * One task run at a time, where every caller gets a run begun after it asked:
 * a caller who comes while a run is under way — a run that may have read its
 * state before the caller's last write — gets the run after it, shared with
 * everyone else who came meanwhile; one that comes after a run began shares
 * that run. Readers that refresh first (the audit keeper's drain, the
 * dispatcher's catalog read) so see every write made before they asked, at
 * no more than one extra run per run under way.
 */
export class FreshRun<T> {
  readonly #task: () => Promise<T>;
  #running: Promise<T> | undefined;
  #following: Promise<T> | undefined;
  #startedAt = -Infinity;

  constructor(task: () => Promise<T>) {
    this.#task = task;
  }

  /** When the latest run began (`performance.now()` time); `-Infinity` before the first. */
  get startedAt(): number {
    return this.#startedAt;
  }

  /**
   * Resolves (or rejects) with a run begun after `asked` (`performance.now()` time, by default now).
   * A run under way that began later is shared; one that began earlier is waited out, whatever its end.
   */
  run(asked = performance.now()): Promise<T> {
    if (this.#running === undefined) return this.#start();
    if (this.#startedAt > asked) return this.#running;
    // Any run begun once the one under way has ended began after everyone waiting here asked.
    this.#following ??= this.#running.then(
      () => this.#running ?? this.#start(),
      () => this.#running ?? this.#start(),
    );
    return this.#following;
  }

  #start(): Promise<T> {
    this.#startedAt = performance.now();
    this.#running = this.#task().finally(() => (this.#running = this.#following = undefined));
    return this.#running;
  }
}
