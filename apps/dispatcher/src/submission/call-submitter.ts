import { randomUUID } from 'node:crypto';
import { BadRequestError, type CallEnvelope, type CallView, errorResult, type FleetError, IdempotencyConflictError, InternalError, isFleetError, laneOf, lazyChild, NoWorkerError, type SubmitCallRequest, type ToolCall } from '@forge-fleet/shared';
import { type CallRecord, type CallStore, laneQueueName, parseLane, requestHash, type Submitted, type TierQueues, type FleetKeys } from '@forge-fleet/store';
import type { TraceCarrier } from '@forge-fleet/telemetry';
import type { Logger } from 'pino';
import type { Admitted } from '../admission/call-admission.js';
import type { ApprovalDeadlineFor } from '../approvals/policy-file.js';
import { type CallAnswers, type Listening, viewOfReply } from '../answers/call-answers.js';
import type { DecisionAudit } from '../audit/decisions.js';
import type { Caller } from '../auth/authenticator.js';
import type { CatalogView } from '../catalog/catalog-view.js';
import type { PackRouter } from '../routing/pack-router.js';
import type { CallSigner } from '../signing/call-signer.js';
import { conflictOf, ownedBy } from './resubmission.js';

/** How long a call must have been queued before a resubmission of it re-enqueues it (see CallSubmitter.#readopt). */
const READOPT_AFTER_MS = 2000;

/** Routes tried for one call when the pack picked lost its last worker as the call was enqueued. */
const ROUTE_ATTEMPTS = 3;

export interface CallSubmitterDeps {
  readonly dispatcherId: string;
  readonly keys: FleetKeys;
  readonly store: CallStore;
  readonly queues: TierQueues;
  readonly signer: CallSigner;
  readonly catalog: CatalogView;
  readonly router: PackRouter;
  readonly answers: CallAnswers;
  /** How long a call of a tool waits for a person before it expires, and where that came from (kept on its record for EXPIRED's message). */
  readonly approvalDeadlineFor: ApprovalDeadlineFor;
  readonly audit: DecisionAudit;
  readonly log: Logger;
}

/** A call as admitted, with what its submission asked for. */
export interface Submission {
  /** The call as submitted (its arguments before any modification). */
  readonly call: ToolCall;
  readonly admitted: Admitted;
  readonly request: Pick<SubmitCallRequest, 'expireAfterMs'>;
  readonly caller: Caller;
  readonly waitMs: number;
  readonly signal?: AbortSignal | undefined;
  readonly trace?: TraceCarrier | undefined;
}

/** Why a submission of a taken id does not answer for the call it names: another caller's id, or another call. */
function refusalOfResubmission(existing: CallRecord, call: ToolCall, caller: Caller, fingerprint: string): FleetError | undefined {
  if (!ownedBy(existing, caller)) return new BadRequestError(`call id '${call.id}' is taken by another caller; submit with another id (or none)`);
  const conflict = conflictOf(existing, call, fingerprint);
  return conflict === undefined ? undefined : new IdempotencyConflictError(call.id, conflict);
}

/**
 * Where an admitted call is submitted: its envelope is built and signed, its
 * record written — waiting for a person, or queued together with its job on
 * the pack queue the router picks (taken back and routed again when that pack
 * lost its last worker meanwhile) — and a resubmitted id is answered for the
 * call already recorded under it, or refused when it is not the same call.
 */
export class CallSubmitter {
  readonly #d: CallSubmitterDeps;

  constructor(deps: CallSubmitterDeps) {
    this.#d = deps;
  }

  /**
   * Records and enqueues the call; answers with its view, final if it ended within the wait.
   * @throws FleetError (NO_WORKER, IDEMPOTENCY_CONFLICT, BAD_REQUEST for an id taken by another caller, UNAVAILABLE when Redis is away).
   */
  async submit(s: Submission): Promise<CallView> {
    const d = this.#d;
    const { call, admitted, caller } = s;
    const { definition } = admitted;
    const now = Date.now();
    const envelope: CallEnvelope = {
      v: 1,
      call: admitted.call,
      tier: definition.tier,
      ...(definition.pool === undefined ? {} : { pool: definition.pool }),
      replyTo: d.dispatcherId,
      enqueuedAt: now,
      ...(s.request.expireAfterMs === undefined ? {} : { deadline: now + s.request.expireAfterMs }),
      ...(caller.subject === undefined ? {} : { caller: caller.subject }),
      ...(s.trace?.traceparent === undefined ? {} : { trace: { traceparent: s.trace.traceparent, ...(s.trace.tracestate === undefined ? {} : { tracestate: s.trace.tracestate }) } }),
    };
    const log = lazyChild(d.log, { callId: call.id, tool: call.name, tier: definition.tier });
    // The lane whose key space holds the record: that of the queues the call may go to.
    const lane = laneOf(definition.tier, definition.pool);
    // What a resubmission of this id must match: the tool and the arguments as submitted, before any modification.
    const fingerprint = requestHash(call.name, call.arguments);
    // A second submission of a taken id answers for the existing call — if it is the caller's own, and the same call.
    const resubmitted = (existing: CallRecord, listening?: Listening): Promise<CallView> => {
      const refused = refusalOfResubmission(existing, call, caller, fingerprint);
      if (refused !== undefined) {
        listening?.stop();
        throw refused;
      }
      log.info({ status: existing.status }, 'call id already submitted; answering for the existing call');
      // The listener registered before the submit stays: the existing call may end at any moment.
      return d.answers.getListening(call.id, caller, listening ?? d.answers.listen(call.id, s.waitMs, s.signal));
    };

    if (admitted.status === 'awaiting_approval') {
      // Nothing is enqueued and no worker slot is held: the record waits for a person (see approvals/).
      // From the same instant as the record's createdAt (the envelope's enqueuedAt), so the two agree to the millisecond.
      const picked = d.approvalDeadlineFor(call.name, definition.approvalDeadlineMs);
      const approvalDeadline = now + picked.ms;
      const listeningForDecision = d.answers.listen(call.id, s.waitMs, s.signal);
      // The index entry goes in the same write as the record (same connection, same turn), so the deadline sweep sees it.
      void d.store.indexApproval(call.id, approvalDeadline).catch((err: unknown) => log.error({ err }, 'could not index a call awaiting approval'));
      const waiting = { ...envelope, token: randomUUID() };
      const created = await d.store.create({ id: call.id, lane, name: call.name, status: 'awaiting_approval', replyTo: d.dispatcherId, envelope: waiting, reason: admitted.reason, approvalDeadline, approvalDeadlineFrom: picked.from, scope: caller.scope.name, request: fingerprint });
      if (!created.created) return resubmitted(created.existing, listeningForDecision);
      d.audit.call(caller, call.id, call.name, { decision: 'awaiting_approval', tier: definition.tier, reason: admitted.reason });
      log.info({ waitingFor: admitted.waitingFor }, 'call awaiting approval');
      const pending: CallView = { id: call.id, status: 'awaiting_approval', reason: admitted.reason };
      if (listeningForDecision === undefined) return pending;
      // A waiting agent hears the outcome: the result once approved and run, or the denial or expiry.
      const message = await listeningForDecision.reply;
      return message === undefined ? pending : viewOfReply(message);
    }

    // Listen before the call can end: a fast worker may answer before the submit's own reply arrives.
    const listening = d.answers.listen(call.id, s.waitMs, s.signal);
    const noWorker = async (): Promise<never> => {
      listening?.stop();
      const error = new NoWorkerError(call.name, laneQueueName(d.keys.prefix, lane), { lane: parseLane(lane) });
      await d.audit.rejectedCall(caller, call.id, call.name, error, definition.tier);
      throw error;
    };
    let avoid: string | undefined;
    for (let attempt = 1; ; attempt++) {
      const route = d.router.route(call.name, avoid);
      if (route === undefined) return noWorker();
      // A token per attempt: a job left behind by an attempt withdrawn below can never start the call.
      const token = randomUUID();
      // Signed last: the signature covers the final arguments, the approval decision and the submission token.
      const queued = d.signer.sign({ ...envelope, token, approval: { decision: admitted.modified ? 'modified' : 'approved' } });
      let submitted: Submitted;
      try {
        // Record, job and the pack's liveness check leave in one write (see TierQueues).
        submitted = await d.queues.submit({ id: call.id, lane, name: call.name, status: 'queued', replyTo: d.dispatcherId, envelope: queued, request: fingerprint }, route);
      } catch (error) {
        listening?.stop();
        if (isFleetError(error) && error.code === 'UNAVAILABLE') {
          // Redis was away for the whole retry window: the call is not accepted. Free its id if its record landed,
          // so the caller's retry of the same id submits afresh (if this fails too, a resubmission re-adopts it).
          await d.store.withdraw(lane, call.id, token).catch(() => undefined);
          throw error;
        }
        // Redis refused the write: the record may exist without its job; end the call so nobody waits for a run that cannot come.
        const failed = errorResult(call, new InternalError(`the call could not be enqueued: ${error instanceof Error ? error.message : String(error)}`, { cause: error }));
        await d.store.end(lane, call.id, 'failed', failed, { onlyFrom: 'queued' }).catch(() => undefined);
        throw error;
      }
      if (!submitted.created) {
        if (ownedBy(submitted.existing, caller) && conflictOf(submitted.existing, call, fingerprint) === undefined) await this.#readopt(submitted.existing, call, lane, log);
        return resubmitted(submitted.existing, listening);
      }
      // The pack lost its last worker as the call was enqueued: take the call back (unless a worker took it) and try another.
      if (submitted.live > 0 || !(await d.store.withdraw(lane, call.id, token))) break;
      if (attempt >= ROUTE_ATTEMPTS) return noWorker();
      avoid = route.queue;
      await d.catalog.refresh();
    }
    // Not awaited: the entry joins the next auto-pipelined write; the call does not wait for it.
    d.audit.call(caller, call.id, call.name, { decision: admitted.modified ? 'modified' : 'approved', tier: definition.tier });
    log.info('call enqueued');
    return d.answers.awaitSubmitted(call.id, listening);
  }

  /**
   * The call a submission's id names, when its tool cannot take a new call now (no live worker serves it, or it
   * left the catalog): a resubmission of the caller's own call with the same tool and arguments answers for that
   * call as it does while the tool is served, since the tool runs once per id. `undefined` when there is no such
   * call: the refusal stands.
   */
  async existing(call: ToolCall, caller: Caller, waitMs: number, signal?: AbortSignal): Promise<CallView | undefined> {
    const d = this.#d;
    const record = await d.store.get(call.id);
    if (record === undefined) return undefined;
    // An id that names a call answers as a resubmission does, whatever the catalog says: never "no worker: call again".
    const refused = refusalOfResubmission(record, call, caller, requestHash(call.name, call.arguments));
    if (refused !== undefined) throw refused;
    return d.answers.getListening(call.id, caller, d.answers.listen(call.id, waitMs, signal));
  }

  /**
   * A resubmission of a call still queued well after its submission re-enqueues
   * it: its record may have been written without its job (the two leave in one
   * write, but Redis can die between them), and then nothing would ever run it.
   * The record is handed to a fresh token (ADOPT_CALL) and a job carrying that
   * token is enqueued, so exactly one job can start the call; an earlier job, if
   * there was one, is skipped as superseded. Only a resubmission of the same call
   * (tool and arguments) does this. It moves the call to the back of a queue, so
   * only calls queued longer than {@link READOPT_AFTER_MS} are taken over.
   */
  async #readopt(existing: CallRecord, call: ToolCall, lane: string, log: Pick<Logger, 'info' | 'error'>): Promise<void> {
    const d = this.#d;
    const previous = existing.envelope;
    if (existing.status !== 'queued' || existing.lane !== lane || previous === undefined || Date.now() - (existing.createdAt ?? Date.now()) < READOPT_AFTER_MS) return;
    const route = d.router.route(call.name);
    if (route === undefined) return;
    const { sig: _old, ...unsigned } = previous;
    const envelope = d.signer.sign({ ...unsigned, token: randomUUID() }) as CallEnvelope & { token: string };
    try {
      if (!(await d.store.adopt(lane, call.id, envelope))) return;
      await d.queues.enqueueRecorded(envelope, route.queue);
      log.info({ queuedForMs: Date.now() - (existing.createdAt ?? 0) }, 'resubmitted call was still queued; enqueued it again under a new token');
    } catch (err) {
      // The resubmission is answered either way; a failed take-over leaves the call as it was.
      log.error({ err }, 'could not re-enqueue a resubmitted queued call');
    }
  }
}
