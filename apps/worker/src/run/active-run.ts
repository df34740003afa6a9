/**
 * A call running in this worker, and the way to stop it: runExecutor hands
 * over its cancel function when the run begins (no AbortController and
 * listener of our own per call on the hot path). The first stop wins.
 */
export class ActiveRun {
  #cancel: ((reason: unknown) => void) | undefined;
  /** Why it was stopped (a shutdown's WorkerLostError, a caller's cancellation), if it was. */
  stoppedFor: unknown;
  #stopped = false;

  attach(cancel: (reason: unknown) => void): void {
    this.#cancel = cancel;
    if (this.#stopped) cancel(this.stoppedFor);
  }

  stop(reason: unknown): void {
    if (this.#stopped) return;
    this.#stopped = true;
    this.stoppedFor = reason;
    this.#cancel?.(reason);
  }
}
