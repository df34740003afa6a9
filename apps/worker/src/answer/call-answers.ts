import { type AuditLogger, type CallEnvelope, type CallProgress, type CallStatus, errorResult, type FleetError, ResourceLimitError, type ToolResult } from '@forge-fleet/shared';
import type { CallStore, ReplyPublisher } from '@forge-fleet/store';
import type { Logger } from 'pino';
import { durableStep } from '../run/durable-step.js';

/** Where a worker's answers go. */
export interface CallAnswersDeps {
  /** The lane whose key space holds the calls. */
  readonly lane: string;
  /** The queue the calls came from, as audit entries name it. */
  readonly queue: string;
  readonly workerId: string;
  readonly store: CallStore;
  /** Passes progress reports on (results go out with the record's final step, see CallStore.end). */
  readonly replies: ReplyPublisher;
  readonly audit: AuditLogger;
  /** Largest result (bytes of JSON) a call may end with; larger ones end as RESOURCE_LIMIT. */
  readonly maxResultBytes: number;
  readonly log: Logger;
}

/**
 * The worker's one way to end a call and tell whoever waits: the record's
 * final transition (exactly once, by its script), the submitter's reply in
 * the same step, the other waiting dispatchers' after it, and the audit entry
 * of the outcome. Progress reports go out the same way while a call runs.
 */
export class CallAnswers {
  readonly #d: CallAnswersDeps;

  constructor(deps: CallAnswersDeps) {
    this.#d = deps;
  }

  /**
   * Ends the call. A result over the size limit ends it with RESOURCE_LIMIT
   * instead: stored and pushed, it would burden Redis and every dispatcher
   * waiting for it. With `onlyFrom`, only a call in that status is ended.
   * The step is retried through a Redis outage; the audit entry is not
   * awaited (one XADD on the auto-pipelined connection).
   * @returns how the call ended (RESOURCE_LIMIT's `failed`, where the result was too large), or undefined when it had ended before.
   */
  async finish(envelope: CallEnvelope, status: CallStatus, result: ToolResult, onlyFrom?: CallStatus): Promise<{ status: CallStatus; code: string | undefined } | undefined> {
    const d = this.#d;
    const { id } = envelope.call;
    let json = JSON.stringify(result);
    if (json.length > d.maxResultBytes && Buffer.byteLength(json) > d.maxResultBytes) {
      const limit = new ResourceLimitError(envelope.call.name, 'output', `the result is ${Buffer.byteLength(json)} bytes of JSON, the limit is ${d.maxResultBytes} (FORGE_MAX_RESULT_BYTES)`, {
        by: 'the worker',
        remedy: "ask for less in one call, or have the worker's operator raise FORGE_MAX_RESULT_BYTES",
      });
      status = 'failed';
      result = errorResult(envelope.call, limit);
      json = JSON.stringify(result);
    }
    const ended = await d.store.end(d.lane, id, status, result, { onlyFrom, replyTo: envelope.replyTo, resultJson: json, step: (transition) => durableStep('finish', id, transition, d.log) });
    if (!ended) return undefined;
    // Every call this worker ends gets its outcome entry, a cancelled one too: a running call's cancellation is only
    // asked for by the dispatcher (which writes an entry only for a call it ended itself), and ends here.
    if (status === 'completed' || status === 'failed' || status === 'cancelled') {
      const audited = d.audit.record({
        at: new Date().toISOString(),
        decision: status,
        callId: id,
        tool: envelope.call.name,
        tier: envelope.tier,
        scopeAtDispatch: d.queue,
        ...(result.error === undefined ? {} : { code: result.error.code }),
        ...(envelope.caller === undefined ? {} : { caller: envelope.caller }),
      });
      Promise.resolve(audited).catch((err: unknown) => d.log.error({ err, callId: id }, 'could not audit a call outcome'));
    }
    return { status, code: result.error?.code };
  }

  /** Ends the call as failed with `error`. */
  async fail(envelope: CallEnvelope, error: FleetError, onlyFrom?: CallStatus): Promise<void> {
    await this.finish(envelope, 'failed', errorResult(envelope.call, error), onlyFrom);
  }

  /**
   * Passes a progress report on to the dispatchers waiting for the call (and
   * keeps it on the record), while this worker still runs it. Best effort: a
   * report that cannot be written is logged, never fails the call.
   */
  async progress(envelope: CallEnvelope, progress: CallProgress, log: Pick<Logger, 'warn'>): Promise<void> {
    const d = this.#d;
    const { id } = envelope.call;
    try {
      const targets = await d.store.progress(d.lane, id, d.workerId, progress);
      if (targets !== undefined && targets.length > 0) await d.replies.publish(d.lane, targets, { v: 1, id, progress });
    } catch (err) {
      log.warn({ err }, 'could not pass on a progress report');
    }
  }
}
