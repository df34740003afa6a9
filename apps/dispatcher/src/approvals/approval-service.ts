import {
  type ApprovalDecisionRequest,
  ApprovalDeniedError,
  type ApprovalList,
  CallNotFoundError,
  type CallView,
  errorResult,
  ExpiredError,
  InternalError,
  NoWorkerError,
  NotAwaitingApprovalError,
  type PendingApproval,
  ToolNotFoundError,
  validateArguments,
} from '@forge-fleet/shared';
import { type CallRecord, type CallStore, parseLane, type TierQueues } from '@forge-fleet/store';
import type { Logger } from 'pino';
import { type Caller, requireRole } from '../auth/authenticator.js';
import type { DecisionAudit } from '../audit/decisions.js';
import type { CatalogView } from '../catalog/catalog-view.js';
import { type ArgumentLimits, checkArguments } from '../limits/arguments.js';
import type { PackRouter } from '../routing/pack-router.js';
import type { CallSigner } from '../signing/call-signer.js';

export interface ApprovalServiceDeps {
  readonly store: CallStore;
  readonly queues: TierQueues;
  readonly signer: CallSigner;
  readonly catalog: CatalogView;
  /** Picks the pack queue an approved call goes to. */
  readonly router: PackRouter;
  readonly audit: DecisionAudit;
  /** The limits a submission's arguments meet (FORGE_MAX_ARGUMENT_BYTES, FORGE_MAX_JSON_DEPTH): a `modify`'s meet them too. */
  readonly limits: ArgumentLimits;
  readonly log: Logger;
  /** How often due approvals are expired. @defaultValue 1000 */
  readonly sweepMs?: number;
}


/** What a person whose decision the schema refused can do: the call keeps waiting (not "call again"). */
const STILL_WAITING_EDIT = "fix the modified arguments to match the tool's parameters schema: the call keeps waiting for a person, so send another modify, or deny it";
const STILL_WAITING_CHANGED = "the call keeps waiting for a person: modify its arguments to fit the tool's parameters schema of now, or deny it";

/** Roles that may see and decide pending approvals. */
const DECIDERS = ['approver', 'admin'] as const;

/**
 * People in the loop: calls waiting for a person (`awaiting_approval`) are
 * listed, approved (enqueued as they are, once checked against the tool's
 * schema of now: it may have changed while the call waited), modified (the edited arguments
 * checked as a submission's are — input limits, then the schema — then
 * enqueued) or denied; one that nobody decides by
 * its deadline ends `failed` with `EXPIRED` — fail closed, distinct from a
 * denial. Every transition is a Lua step on the call's record, so a call is
 * decided once, whichever dispatcher and approver get there first; the agent
 * waiting on the call hears the outcome through its reply list.
 */
export class ApprovalService {
  #timer: NodeJS.Timeout | undefined;

  constructor(private readonly d: ApprovalServiceDeps) {}

  /** Starts expiring due approvals in the background. */
  start(): void {
    this.#timer = setInterval(() => {
      this.sweep().catch((err: unknown) => this.d.log.error({ err }, 'approval deadline sweep failed'));
    }, this.d.sweepMs ?? 1000);
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
  }

  /**
   * Pending calls, oldest deadline first.
   * @throws ForbiddenError unless the caller is an approver or admin.
   */
  async list(caller: Caller, limit = 100): Promise<ApprovalList> {
    requireRole(caller, 'list pending approvals', DECIDERS);
    const ids = await this.d.store.approvalIds({ limit });
    const records = await Promise.all(ids.map((id) => this.d.store.get(id)));
    const approvals: PendingApproval[] = [];
    for (const record of records) {
      if (record?.status !== 'awaiting_approval' || record.envelope === undefined) continue;
      approvals.push({
        id: record.id,
        tool: record.name,
        arguments: record.envelope.call.arguments,
        ...(record.envelope.caller === undefined ? {} : { caller: record.envelope.caller }),
        scope: record.scope ?? 'default',
        reason: record.reason ?? 'a person must approve it',
        deadline: record.approvalDeadline ?? 0,
        createdAt: record.createdAt ?? 0,
      });
    }
    return { approvals };
  }

  /**
   * A person's decision on a waiting call.
   * @throws ForbiddenError, CallNotFoundError, NotAwaitingApprovalError; for an edit a submission of its arguments would get refused
   *   with (PayloadTooLargeError, BadRequestError: over the input limits; SchemaValidationError), that error — the call stays pending.
   */
  async decide(id: string, request: ApprovalDecisionRequest, caller: Caller): Promise<CallView> {
    requireRole(caller, 'decide approvals', DECIDERS);
    const d = this.d;
    const record = await d.store.get(id);
    if (record === undefined) throw new CallNotFoundError(id);
    if (record.status !== 'awaiting_approval' || record.envelope === undefined) throw new NotAwaitingApprovalError(id, record.status, 'it was decided already, or never needed approval');
    if (record.approvalDeadline !== undefined && Date.now() > record.approvalDeadline) {
      await this.#expire(record);
      throw new NotAwaitingApprovalError(id, 'failed', 'its approval deadline passed, so it expired');
    }
    const by = caller.subject ?? `anonymous ${caller.role}`;
    const original = record.envelope.call.arguments;
    if (request.decision === 'deny') {
      const reason = request.reason ?? 'denied by a person';
      const result = errorResult(record.envelope.call, new ApprovalDeniedError(record.name, `${reason} (decided by ${by})`));
      if (!(await d.store.end(record.lane, id, 'failed', result, { onlyFrom: 'awaiting_approval' }))) throw new NotAwaitingApprovalError(id, 'decided', 'another decision got there first');
      await d.store.unindexApproval(id);
      this.#audit(record, by, { decision: 'rejected', category: 'denied', code: 'APPROVAL_DENIED', reason, arguments: original });
      return { id, status: 'failed', result };
    }

    const definition = d.catalog.definitionOf(record.name);
    if (definition === undefined) throw new ToolNotFoundError(record.name, { remedy: 'the tool is no longer in the catalog; deny the call instead' });
    let args = original;
    if (request.decision === 'modify') {
      args = request.arguments ?? {};
      // An edit meets every check a submission's arguments meet, in the same order and with the same answer: the
      // input limits, then the schema. Refused, the call keeps waiting; the person can try again.
      checkArguments(args, d.limits);
      validateArguments(definition, args, 'after_modify', STILL_WAITING_EDIT);
    } else {
      // Admitted under the definition of then: one that changed since (an MCP server's new schema) may refuse them.
      // Refused, the call keeps waiting, as after a refused edit; a person can make them fit, or deny it.
      validateArguments(definition, args, 'definition_changed', STILL_WAITING_CHANGED);
    }
    const decision = request.decision === 'modify' ? 'modified' : 'approved';
    const envelope = d.signer.sign({ ...record.envelope, call: { ...record.envelope.call, arguments: args }, approval: { decision, by }, enqueuedAt: Date.now() });
    const outcome = await d.store.approve(record.lane, id, by, decision, envelope);
    if (outcome.outcome === 'expired') {
      await this.#expire(record);
      throw new NotAwaitingApprovalError(id, 'failed', 'its approval deadline passed, so it expired');
    }
    if (outcome.outcome === 'not_waiting') throw new NotAwaitingApprovalError(id, outcome.status, 'another decision got there first');
    if (outcome.outcome === 'missing') throw new CallNotFoundError(id);
    await d.store.unindexApproval(id);
    const route = d.router.route(record.name);
    if (route === undefined) {
      // Approved, but nobody can run it now: end it as such rather than park it on a queue no worker reads.
      const result = errorResult(envelope.call, new NoWorkerError(record.name, record.lane, { lane: parseLane(record.lane), ended: true }));
      if (await d.store.end(record.lane, id, 'failed', result, { onlyFrom: 'queued' })) this.#audit(record, by, { decision: 'failed', code: 'NO_WORKER', arguments: original });
      return { id, status: 'failed', result };
    }
    try {
      await d.queues.enqueueRecorded(envelope, route.queue);
    } catch (error) {
      // Approved but not enqueued: end it rather than leave it queued for a run that cannot come.
      const failed = errorResult(envelope.call, new InternalError(`the approved call could not be enqueued: ${error instanceof Error ? error.message : String(error)}`, { cause: error }));
      await d.store.end(record.lane, id, 'failed', failed, { onlyFrom: 'queued' });
      throw error;
    }
    this.#audit(record, by, { decision, arguments: original, ...(decision === 'modified' ? { editedArguments: args } : {}), ...(request.reason === undefined ? {} : { reason: request.reason }) });
    d.log.info({ callId: id, tool: record.name, decision, by }, 'call approved by a person');
    return { id, status: 'queued' };
  }

  /** Ends every call whose approval deadline has passed (any dispatcher may; each call ends once). */
  async sweep(now = Date.now()): Promise<number> {
    const due = await this.d.store.approvalIds({ dueBy: now, limit: 100 });
    let expired = 0;
    for (const id of due) {
      const record = await this.d.store.get(id);
      if (record?.status === 'awaiting_approval' && (await this.#expire(record))) expired++;
      else await this.d.store.unindexApproval(id);
    }
    return expired;
  }

  /** Ends a waiting call as EXPIRED and tells whoever waits; false when something else ended it first. */
  async #expire(record: CallRecord): Promise<boolean> {
    const d = this.d;
    const deadline = record.approvalDeadline ?? Date.now();
    const result = errorResult({ id: record.id, name: record.name }, new ExpiredError(record.name, deadline, 'person', record.approvalDeadlineFrom));
    const ended = await d.store.end(record.lane, record.id, 'failed', result, { onlyFrom: 'awaiting_approval' });
    await d.store.unindexApproval(record.id);
    if (!ended) return false;
    d.audit.write({ decision: 'failed', code: 'EXPIRED', callId: record.id, tool: record.name, reason: 'no person decided before the approval deadline', ...(record.envelope?.caller === undefined ? {} : { caller: record.envelope.caller }) });
    return true;
  }

  #audit(record: CallRecord, by: string, fields: Parameters<DecisionAudit['write']>[0]): void {
    this.d.audit.write({
      callId: record.id,
      tool: record.name,
      decidedBy: by,
      ...(record.envelope?.caller === undefined ? {} : { caller: record.envelope.caller }),
      ...(record.envelope === undefined ? {} : { tier: record.envelope.tier }),
      ...(record.scope === undefined ? {} : { scopeAtDispatch: record.scope }),
      ...fields,
    });
  }
}

