import { isErrorCode, isRetryable, WorkerLostError } from '@forge-fleet/shared';

/** What the retry policy needs to know of a call and its run. */
export interface RunFacts {
  readonly tool: string;
  /** The tool's own `retryable` flag: whether running it again is safe. */
  readonly retryable: boolean;
  /** The run this was (1 for the first). */
  readonly starts: number;
  /** Runs of a retryable tool in all (FORGE_RETRY_ATTEMPTS). */
  readonly attempts: number;
  /** First retry delay, doubled for each further retry (FORGE_RETRY_BACKOFF_MS). */
  readonly backoffMs: number;
}

/** What becomes of a call after a run. */
export type AfterRun =
  /** Back to the queue, as a job delayed by this long. */
  | { readonly then: 'retry'; readonly delayMs: number }
  /** Ended with this error (the run was lost to a shutdown). */
  | { readonly then: 'lost'; readonly error: WorkerLostError }
  /** Ended with the run's own result. */
  | { readonly then: 'end' };

/**
 * A run ended. A call runs again only when the tool says that is safe and the
 * failure may pass (a retryable code, or the worker shutting down under it),
 * within the attempts; retries back off exponentially, but a call handed back
 * by a shutdown goes at once. A run lost to a shutdown that cannot run again
 * ends WORKER_LOST, saying why.
 */
export function afterRun(facts: RunFacts, outcome: { readonly lostToShutdown: boolean; readonly code: string | undefined; readonly isError: boolean }): AfterRun {
  const { lostToShutdown, code } = outcome;
  const failed = lostToShutdown || (outcome.isError && code !== 'CANCELLED');
  if (!failed) return { then: 'end' };
  const transient = lostToShutdown || (code !== undefined && isErrorCode(code) && isRetryable(code));
  if (facts.retryable && transient && facts.starts < facts.attempts) {
    return { then: 'retry', delayMs: lostToShutdown ? 0 : facts.backoffMs * 2 ** (facts.starts - 1) };
  }
  if (!lostToShutdown) return { then: 'end' };
  return {
    then: 'lost',
    error: facts.retryable
      ? new WorkerLostError(facts.tool, 'retries_exhausted', { attempts: facts.starts, detail: 'the worker shut down before the call finished' })
      : new WorkerLostError(facts.tool, 'shutdown'),
  };
}

/**
 * A call came back whose previous worker was lost mid-run (its lock lapsed):
 * run it again only when the tool is retryable and attempts remain.
 */
export function afterLostRun(facts: RunFacts): { readonly then: 'rerun' } | { readonly then: 'lost'; readonly error: WorkerLostError } {
  if (!facts.retryable) return { then: 'lost', error: new WorkerLostError(facts.tool, 'lock_expired', { detail: `during run ${facts.starts - 1}` }) };
  if (facts.starts > facts.attempts) return { then: 'lost', error: new WorkerLostError(facts.tool, 'retries_exhausted', { attempts: facts.starts - 1, detail: 'its worker stopped answering (lock expired)' }) };
  return { then: 'rerun' };
}

/**
 * Whether a run of a signed envelope may go ahead, given how many runs the
 * lane's execution record counts for it, this one included (see Executions
 * in packages/store). The first run always may; a tool flagged retryable may
 * run as often as its retries allow, and no more; any other run is a replay
 * of a job whose call already ran — Redis state a dispatcher's user controls
 * cannot make it run again.
 */
export function mayRun(facts: Pick<RunFacts, 'retryable' | 'attempts'>, runs: number): boolean {
  return runs === 1 || (facts.retryable && runs <= facts.attempts);
}
