import { CallNotFoundError, CancelledError, type CallView, errorResult, ExpiredError, isFinalStatus, type ResultReply } from '@forge-fleet/shared';
import { type CallRecord, type CallStore, type ReplyInbox, viewOf } from '@forge-fleet/store';
import type { Logger } from 'pino';
import type { DecisionAudit } from '../audit/decisions.js';
import type { Caller } from '../auth/authenticator.js';
import { ownedBy } from '../submission/resubmission.js';

/** How long a cancel request waits for a running call's worker to confirm. */
const CANCEL_CONFIRM_MS = 5000;

/** A reply listener registered with the inbox (see ReplyInbox.listen). */
export type Listening = ReturnType<ReplyInbox['listen']>;

export interface CallAnswersDeps {
  readonly dispatcherId: string;
  readonly store: CallStore;
  readonly inbox: ReplyInbox;
  readonly audit: DecisionAudit;
  readonly log: Logger;
}

/** A call's view from the reply that ended it. */
export function viewOfReply(message: ResultReply): CallView {
  return { id: message.id, status: message.status, result: message.result };
}

/**
 * Where a call is answered, on the dispatcher: a caller reads a call, waits
 * for it to end (through a listener on this dispatcher's reply lists,
 * registered before the record is read so no result slips between the two),
 * or cancels it. A queued call past its deadline is ended here as EXPIRED.
 */
export class CallAnswers {
  readonly #d: CallAnswersDeps;

  constructor(deps: CallAnswersDeps) {
    this.#d = deps;
  }

  /** Starts listening for a call's end, for up to `waitMs` (none for 0). */
  listen(id: string, waitMs: number, signal?: AbortSignal): Listening | undefined {
    return waitMs > 0 ? this.#d.inbox.listen(id, waitMs, signal) : undefined;
  }

  /**
   * The call's view, waiting up to `waitMs` for it to end.
   * @throws CallNotFoundError
   */
  async get(id: string, waitMs: number, caller: Caller, signal?: AbortSignal): Promise<CallView> {
    // Listen before reading: the call may end between the read and the wait, and its reply must still find us.
    return this.getListening(id, caller, this.listen(id, waitMs, signal));
  }

  /**
   * The call's view through a listener already registered (or none: no wait).
   * @throws CallNotFoundError
   */
  async getListening(id: string, caller: Caller, listening: Listening | undefined): Promise<CallView> {
    const d = this.#d;
    let record: CallRecord | undefined;
    try {
      record = listening !== undefined ? await d.store.watch(id, d.dispatcherId) : await d.store.get(id);
    } catch (error) {
      listening?.stop();
      throw error;
    }
    if (record === undefined || !ownedBy(record, caller)) {
      listening?.stop();
      throw new CallNotFoundError(id);
    }
    return this.#await(record, listening);
  }

  /** The view a submission answers with once its call is enqueued: the end, if it comes within the wait, else its status now. */
  async awaitSubmitted(id: string, listening: Listening | undefined): Promise<CallView> {
    if (listening === undefined) return { id, status: 'queued' };
    const message = await listening.reply;
    if (message !== undefined) return viewOfReply(message);
    const record = await this.#d.store.get(id);
    return record === undefined ? { id, status: 'queued' } : viewOf(record);
  }

  /**
   * Cancels a call: a queued one ends now; a running one has its handler's
   * signal fired and ends when the worker confirms.
   * @throws CallNotFoundError
   */
  async cancel(id: string, caller: Caller): Promise<CallView> {
    const d = this.#d;
    const record = await d.store.get(id);
    if (record === undefined || !ownedBy(record, caller)) throw new CallNotFoundError(id);
    const cancelled = errorResult({ id, name: record.name }, new CancelledError(record.name, 'cancelled by its caller'));
    const outcome = await d.store.cancel(record.lane, id, cancelled);
    d.log.info({ callId: id, tool: record.name, outcome: outcome.state }, 'cancel requested');
    switch (outcome.state) {
      case 'missing':
        throw new CallNotFoundError(id);
      case 'cancelled':
        d.audit.call(caller, id, record.name, { decision: 'cancelled', code: 'CANCELLED' });
        return { id, status: 'cancelled', result: cancelled };
      case 'running': {
        const reply = d.inbox.wait(id, CANCEL_CONFIRM_MS);
        // Watch first so the confirmation reaches this dispatcher even if another one submitted the call.
        await d.store.watch(id, d.dispatcherId);
        await d.store.signalCancel(record.lane, id);
        const message = await reply;
        if (message !== undefined) return viewOfReply(message);
        const now = await d.store.get(id);
        return now === undefined ? { id, status: 'running' } : viewOf(now);
      }
      case 'final': {
        const now = await d.store.get(id);
        if (now === undefined) throw new CallNotFoundError(id);
        return viewOf(now);
      }
    }
  }

  /** Answers with the call's final view once it ends, through a listener registered before the record was read. */
  async #await(record: CallRecord, listening: Listening | undefined): Promise<CallView> {
    let early: CallView | undefined;
    try {
      early = isFinalStatus(record.status) ? viewOf(record) : await this.#expireIfDue(record);
    } catch (error) {
      listening?.stop();
      throw error;
    }
    if (early !== undefined || listening === undefined) {
      listening?.stop();
      return early ?? viewOf(record);
    }
    const message = await listening.reply;
    if (message !== undefined) return viewOfReply(message);
    const now = await this.#d.store.get(record.id);
    return now === undefined ? viewOf(record) : viewOf(now);
  }

  /** A queued call past its deadline ends as EXPIRED here too, so it does not wait for a worker to notice. */
  async #expireIfDue(record: CallRecord): Promise<CallView | undefined> {
    if (record.status !== 'queued' || record.deadline === undefined || Date.now() <= record.deadline) return undefined;
    const result = errorResult({ id: record.id, name: record.name }, new ExpiredError(record.name, record.deadline));
    if (!(await this.#d.store.end(record.lane, record.id, 'failed', result, { onlyFrom: 'queued' }))) return undefined;
    this.#d.audit.write({ decision: 'failed', code: 'EXPIRED', callId: record.id, tool: record.name, ...(record.envelope?.caller === undefined ? {} : { caller: record.envelope.caller }) });
    return { id: record.id, status: 'failed', result };
  }
}
