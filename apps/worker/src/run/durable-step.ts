import type { Logger } from 'pino';

/** How long a call-state step is retried through a Redis outage before the worker gives the call up (its lock has long expired by then: another worker answers it as lost). */
export const OUTAGE_LIMIT_MS = 10 * 60 * 1000;

/**
 * Runs a call-state step until Redis takes it. The step's outcome is what
 * the call's one final answer depends on (its result is only in this
 * process's memory until `finish` lands), so a Redis outage must delay it,
 * never drop it: the connection fails a command after a few reconnection
 * attempts, and this tries again with backoff (100 ms doubling to 2 s) for
 * up to {@link OUTAGE_LIMIT_MS}, logging each failure. A step that a
 * restarted Redis no longer needs (the call ended meanwhile) answers as such
 * from its script; a step that must not land twice carries its own id.
 */
export async function durableStep<T>(step: string, callId: string, op: () => Promise<T>, log: Pick<Logger, 'warn'>): Promise<T> {
  const began = Date.now();
  for (let attempt = 0; ; attempt++) {
    try {
      return await op();
    } catch (err) {
      if (Date.now() - began > OUTAGE_LIMIT_MS) throw err;
      log.warn({ err, callId, step, attempt }, 'Redis did not take a call step; trying again');
      await new Promise((resolve) => setTimeout(resolve, Math.min(2000, 100 * 2 ** attempt)));
    }
  }
}
