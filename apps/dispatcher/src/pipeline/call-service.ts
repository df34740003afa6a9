import { randomUUID } from 'node:crypto';
import {
  admitToolCall,
  type ApprovalHandler,
  BadRequestError,
  CallNotFoundError,
  type CallEnvelope,
  type CallView,
  CancelledError,
  errorResult,
  ExpiredError,
  type FleetKeys,
  InternalError,
  isFinalStatus,
  laneOf,
  lazyChild,
  IdempotencyConflictError,
  type IdempotencyConflictKind,
  isFleetError,
  NoWorkerError,
  NotSpeculatableError,
  type ResultReply,
  type CallProgress,
  type RiskSignalQueue,
  stableStringify,
  type SubmitCallRequest,
  type ToolCall,
} from '@forge-fleet/shared';
import { type CallRecord, type CallStore, laneQueueName, publishReply, type RedisConnection, type ReplyInbox, requestHash, type Submitted, type TierQueues, viewOf } from '@forge-fleet/store';
import type { ToolTracer, TraceCarrier } from '@forge-fleet/telemetry';
import type { Logger } from 'pino';
import type { DecisionAudit } from '../audit/decisions.js';
import type { Caller } from '../auth/authenticator.js';
import type { CatalogView } from '../catalog/catalog-view.js';
import { type ArgumentLimits, checkArguments } from '../limits/arguments.js';
import type { PackRouter } from '../routing/pack-router.js';
import type { CallSigner } from '../signing/call-signer.js';

export interface CallServiceDeps {
  readonly dispatcherId: string;
  readonly redis: RedisConnection;
  readonly keys: FleetKeys;
  readonly store: CallStore;
  readonly queues: TierQueues;
  readonly signer: CallSigner;
  readonly inbox: ReplyInbox;
  readonly catalog: CatalogView;
  /** Picks the pack queue each call goes to. */
  readonly router: PackRouter;
  readonly approval: ApprovalHandler;
  /** How long a call of a tool waits for a person before it expires (from the policy). */
  readonly approvalDeadlineFor: (tool: string) => number;
  /** Receives every admission decision (and cancellations, expiries). */
  readonly audit: DecisionAudit;
  readonly risk: RiskSignalQueue;
  readonly limits: ArgumentLimits;
  readonly log: Logger;
  /** Spans of dispatched calls (the worker's span joins them through the envelope). Off when undefined. */
  readonly tracer?: ToolTracer | undefined;
}

/** How long a cancel request waits for a running call's worker to confirm. */
const CANCEL_CONFIRM_MS = 5000;

/** How long a call must have been queued before a resubmission of it re-enqueues it (see CallService.#readopt). */
const READOPT_AFTER_MS = 2000;

/** Routes tried for one call when the pack picked lost its last worker as the call was enqueued. */
const ROUTE_ATTEMPTS = 3;

/**
 * Whether the caller may see and cancel a call: its submitter, or an admin.
 * Calls submitted anonymously (dev mode) are anyone's. Others' calls are
 * answered as not found, so ids reveal nothing.
 */
function ownedBy(record: CallRecord, caller: Caller): boolean {
  const owner = record.envelope?.caller;
  return owner === undefined || caller.role === 'admin' || owner === caller.subject;
}

/** A reply listener registered with the inbox (see ReplyInbox.listen). */
type Listening = ReturnType<ReplyInbox['listen']>;

/**
 * How a resubmission differs from the call recorded under its id: `tool`,
 * `arguments`, or `undefined` when it is the same call. Records written before
 * the request hash was kept are compared by their envelope's call.
 */
function conflictOf(existing: CallRecord, call: ToolCall, request: string): IdempotencyConflictKind | undefined {
  if (existing.name !== call.name) return 'tool';
  if (existing.request !== undefined) return existing.request === request ? undefined : 'arguments';
  const recorded = existing.envelope?.call.arguments;
  return recorded === undefined || stableStringify(recorded) === stableStringify(call.arguments) ? undefined : 'arguments';
}

function viewOfReply(message: ResultReply): CallView {
  return { id: message.id, status: message.status, result: message.result };
}

/**
 * What the HTTP routes do: admit a call (scope → lookup → schema → approval),
 * record it, enqueue it on its tier queue and wait for its result; read,
 * await and cancel calls by id.
 */
export class CallService {
  constructor(private readonly d: CallServiceDeps) {}

  /**
   * Submits a call. Returns its view: final if it ended within `waitMs`.
   * Every admission decision goes to the audit stream: one entry per call.
   * @throws FleetError (BAD_REQUEST / PAYLOAD_TOO_LARGE for arguments over the limits, OUT_OF_SCOPE, TOOL_NOT_FOUND, NO_WORKER, SCHEMA_VALIDATION, APPROVAL_DENIED).
   */
  async submit(request: SubmitCallRequest, caller: Caller, waitMs: number, signal?: AbortSignal, trace?: TraceCarrier): Promise<CallView> {
    const call: ToolCall = { id: request.id ?? randomUUID(), name: request.name, arguments: request.arguments };
    const span = this.d.tracer?.dispatch(call, trace);
    if (span === undefined) return this.#submit(call, request, caller, waitMs, signal, undefined);
    try {
      const view = await this.#submit(call, request, caller, waitMs, signal, span.carrier);
      span.end({ decision: view.status });
      return view;
    } catch (error) {
      span.end({ error });
      throw error;
    }
  }

  async #submit(call: ToolCall, request: SubmitCallRequest, caller: Caller, waitMs: number, signal: AbortSignal | undefined, trace: TraceCarrier | undefined): Promise<CallView> {
    const d = this.d;
    let admission: Awaited<ReturnType<typeof admitToolCall>>;
    try {
      checkArguments(call.arguments, d.limits);
      await d.catalog.ensure(call.name);
      // No audit sink here: this service writes the one entry per call itself, rejections included.
      admission = await admitToolCall(call, {
        lookup: (name) => d.catalog.lookup(name),
        approval: d.approval,
        scope: caller.scope,
        risk: d.risk,
        ctx: { authorization: caller.authorization, caller: caller.authorization?.subject },
      });
    } catch (error) {
      await d.audit.rejectedCall(caller, call.id, call.name, error, d.catalog.definitionOf(call.name)?.tier);
      throw error;
    }
    const { definition } = admission;
    // Speculative: run ahead of need, result possibly discarded. Only tools that say that is harmless, and never a person's time.
    if (request.speculative === true && (!definition.speculatable || admission.status === 'awaiting_approval')) {
      const error = new NotSpeculatableError(call.name, definition.speculatable ? 'its call would wait for a person, and speculative calls are never sent to one' : 'it is not flagged speculatable');
      await d.audit.rejectedCall(caller, call.id, call.name, error, d.catalog.definitionOf(call.name)?.tier);
      throw error;
    }
    const now = Date.now();
    const envelope: CallEnvelope = {
      v: 1,
      call: admission.call,
      tier: definition.tier,
      ...(definition.pool === undefined ? {} : { pool: definition.pool }),
      replyTo: d.dispatcherId,
      enqueuedAt: now,
      ...(request.expireAfterMs === undefined ? {} : { deadline: now + request.expireAfterMs }),
      ...(caller.subject === undefined ? {} : { caller: caller.subject }),
      ...(trace?.traceparent === undefined ? {} : { trace: { traceparent: trace.traceparent, ...(trace.tracestate === undefined ? {} : { tracestate: trace.tracestate }) } }),
    };
    const log = lazyChild(d.log, { callId: call.id, tool: call.name, tier: definition.tier });
    // The lane whose key space holds the record: that of the queue the call goes to.
    const lane = laneOf(definition.tier, definition.pool);
    // What a resubmission of this id must match: the tool and the arguments as submitted, before any modification.
    const fingerprint = requestHash(call.name, call.arguments);
    // A second submission of a taken id answers for the existing call — if it is the caller's own, and the same call.
    const resubmitted = (existing: CallRecord, listening?: Listening): Promise<CallView> => {
      if (!ownedBy(existing, caller)) {
        listening?.stop();
        throw new BadRequestError(`call id '${call.id}' is taken by another caller; submit with another id (or none)`);
      }
      const conflict = conflictOf(existing, call, fingerprint);
      if (conflict !== undefined) {
        listening?.stop();
        throw new IdempotencyConflictError(call.id, conflict);
      }
      log.info({ status: existing.status }, 'call id already submitted; answering for the existing call');
      // The listener registered before the submit stays: the existing call may end at any moment.
      return waitMs > 0 ? this.#getListening(call.id, caller, listening ?? this.d.inbox.listen(call.id, waitMs, signal)) : this.get(call.id, 0, caller, signal);
    };
    if (admission.status === 'awaiting_approval') {
      // Nothing is enqueued and no worker slot is held: the record waits for a person (see approvals/).
      // From the same instant as the record's createdAt (the envelope's enqueuedAt), so the two agree to the millisecond.
      const approvalDeadline = now + d.approvalDeadlineFor(call.name);
      const listeningForDecision = waitMs > 0 ? d.inbox.listen(call.id, waitMs, signal) : undefined;
      // The index entry goes in the same write as the record (same connection, same turn), so the deadline sweep sees it.
      void d.store.indexApproval(call.id, approvalDeadline).catch((err: unknown) => log.error({ err }, 'could not index a call awaiting approval'));
      const waiting = { ...envelope, call: admission.call, token: randomUUID() };
      const created = await d.store.create({ id: call.id, lane, name: call.name, status: 'awaiting_approval', replyTo: d.dispatcherId, envelope: waiting, reason: admission.reason, approvalDeadline, scope: caller.scope.name, request: fingerprint });
      if (!created.created) return resubmitted(created.existing, listeningForDecision);
      d.audit.call(caller, call.id, call.name, { decision: 'awaiting_approval', tier: definition.tier, reason: admission.reason });
      log.info({ waitingFor: admission.waitingFor }, 'call awaiting approval');
      const pending: CallView = { id: call.id, status: 'awaiting_approval', reason: admission.reason };
      if (listeningForDecision === undefined) return pending;
      // A waiting agent hears the outcome: the result once approved and run, or the denial or expiry.
      const message = await listeningForDecision.reply;
      return message === undefined ? pending : viewOfReply(message);
    }
    // Listen before the call can end: a fast worker may answer before the submit's own reply arrives.
    const listening = waitMs > 0 ? d.inbox.listen(call.id, waitMs, signal) : undefined;
    const noWorker = async (): Promise<never> => {
      listening?.stop();
      const error = new NoWorkerError(call.name, laneQueueName(d.keys.prefix, lane));
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
      const queued = d.signer.sign({ ...envelope, token, approval: { decision: admission.modified ? 'modified' : 'approved' } });
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
    d.audit.call(caller, call.id, call.name, { decision: admission.modified ? 'modified' : 'approved', tier: definition.tier });
    log.info('call enqueued');
    if (listening === undefined) return { id: call.id, status: 'queued' };
    const message = await listening.reply;
    if (message !== undefined) return viewOfReply(message);
    const record = await d.store.get(call.id);
    return record === undefined ? { id: call.id, status: 'queued' } : viewOf(record);
  }

  /**
   * A resubmission of a call still queued well after its submission re-enqueues
   * it: its record may have been written without its job (the two leave in one
   * write, but Redis can die between them), and then nothing would ever run it.
   * The record is handed to a fresh token (ADOPT_CALL) and a job carrying that
   * token is enqueued, so exactly one job can start the call; an earlier job, if
   * there was one, is skipped as superseded. The call keeps its arguments: only
   * a resubmission of the same call (name and arguments) does this. It moves the
   * call to the back of its queue, so only calls queued longer than
   * {@link READOPT_AFTER_MS} are taken over.
   */
  async #readopt(existing: CallRecord, call: ToolCall, lane: string, log: Pick<Logger, 'info' | 'error'>): Promise<void> {
    const d = this.d;
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

  /**
   * Hears the progress reports of a call while this dispatcher waits for it
   * (it submitted the call, or a `get` with a wait is under way). Returns the unsubscription.
   */
  onProgress(id: string, listener: (progress: CallProgress) => void): () => void {
    return this.d.inbox.onProgress(id, listener);
  }

  /**
   * The call's view, waiting up to `waitMs` for it to end.
   * @throws CallNotFoundError
   */
  async get(id: string, waitMs: number, caller: Caller, signal?: AbortSignal): Promise<CallView> {
    // Listen before reading: the call may end between the read and the wait, and its reply must still find us.
    return this.#getListening(id, caller, waitMs > 0 ? this.d.inbox.listen(id, waitMs, signal) : undefined);
  }

  async #getListening(id: string, caller: Caller, listening: Listening | undefined): Promise<CallView> {
    let record: CallRecord | undefined;
    try {
      record = listening !== undefined ? await this.d.store.watch(id, this.d.dispatcherId) : await this.d.store.get(id);
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

  /**
   * Cancels a call: a queued one ends now; a running one has its handler's
   * signal fired and ends when the worker confirms.
   * @throws CallNotFoundError
   */
  async cancel(id: string, caller: Caller): Promise<CallView> {
    const d = this.d;
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
        await publishReply(d.redis, d.keys, record.lane, outcome.targets, { v: 1, id, status: 'cancelled', result: cancelled });
        return { id, status: 'cancelled', result: cancelled };
      case 'running': {
        const reply = d.inbox.wait(id, CANCEL_CONFIRM_MS);
        // Watch first so the confirmation reaches this dispatcher even if another one submitted the call.
        await d.store.watch(id, d.dispatcherId);
        await d.redis.publish(d.keys.cancelChannel(record.lane), id);
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
    const now = await this.d.store.get(record.id);
    return now === undefined ? viewOf(record) : viewOf(now);
  }

  /** A queued call past its deadline ends as EXPIRED here too, so it does not wait for a worker to notice. */
  async #expireIfDue(record: CallRecord): Promise<CallView | undefined> {
    if (record.status !== 'queued' || record.deadline === undefined || Date.now() <= record.deadline) return undefined;
    const result = errorResult({ id: record.id, name: record.name }, new ExpiredError(record.name, record.deadline));
    if (!(await this.d.store.end(record.lane, record.id, 'failed', result, { onlyFrom: 'queued' }))) return undefined;
    this.d.audit.write({ decision: 'failed', code: 'EXPIRED', callId: record.id, tool: record.name, ...(record.envelope?.caller === undefined ? {} : { caller: record.envelope.caller }) });
    return { id: record.id, status: 'failed', result };
  }
}
