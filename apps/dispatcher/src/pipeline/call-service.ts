import { randomUUID } from 'node:crypto';
import { type ApprovalHandler, type CallProgress, type CallView, isFleetError, type RiskSignalQueue, type SubmitCallRequest, type ToolCall } from '@forge-fleet/shared';
import { type FleetKeys } from '@forge-fleet/store';
import type { CallStore, ReplyInbox, TierQueues } from '@forge-fleet/store';
import type { ToolTracer, TraceCarrier } from '@forge-fleet/telemetry';
import type { Logger } from 'pino';
import { CallAdmission } from '../admission/call-admission.js';
import type { ApprovalDeadlineFor } from '../approvals/policy-file.js';
import { CallAnswers } from '../answers/call-answers.js';
import type { DecisionAudit } from '../audit/decisions.js';
import type { Caller } from '../auth/authenticator.js';
import type { CatalogView } from '../catalog/catalog-view.js';
import type { ArgumentLimits } from '../limits/arguments.js';
import type { PackRouter } from '../routing/pack-router.js';
import type { CallSigner } from '../signing/call-signer.js';
import { CallSubmitter } from '../submission/call-submitter.js';

export interface CallServiceDeps {
  readonly dispatcherId: string;
  readonly keys: FleetKeys;
  readonly store: CallStore;
  readonly queues: TierQueues;
  readonly signer: CallSigner;
  readonly inbox: ReplyInbox;
  readonly catalog: CatalogView;
  /** Picks the pack queue each call goes to. */
  readonly router: PackRouter;
  readonly approval: ApprovalHandler;
  /** How long a call of a tool waits for a person before it expires, and where that came from (the policy, the tool's own, or the default). */
  readonly approvalDeadlineFor: ApprovalDeadlineFor;
  /** Receives every admission decision (and cancellations, expiries). */
  readonly audit: DecisionAudit;
  readonly risk: RiskSignalQueue;
  readonly limits: ArgumentLimits;
  readonly log: Logger;
  /** Spans of dispatched calls (the worker's span joins them through the envelope). Off when undefined. */
  readonly tracer?: ToolTracer | undefined;
}

/**
 * What every entrance (HTTP, batches, streams, MCP) does with a call, in the
 * same order for all of them: admit it (admission/), submit it
 * (submission/: record, route, enqueue), and answer it (answers/: wait, read,
 * cancel). Every admission decision goes to the audit stream: one entry per call.
 */
export class CallService {
  readonly #admission: CallAdmission;
  readonly #submitter: CallSubmitter;
  readonly #answers: CallAnswers;
  readonly #inbox: ReplyInbox;
  readonly #tracer: ToolTracer | undefined;
  /** What a call's arguments may be: the limits every entrance checks them against (MCP's own refusals too). */
  readonly argumentLimits: ArgumentLimits;

  constructor(d: CallServiceDeps) {
    this.argumentLimits = d.limits;
    this.#inbox = d.inbox;
    this.#tracer = d.tracer;
    this.#admission = new CallAdmission({ catalog: d.catalog, approval: d.approval, risk: d.risk, limits: d.limits, audit: d.audit });
    this.#answers = new CallAnswers({ dispatcherId: d.dispatcherId, store: d.store, inbox: d.inbox, audit: d.audit, log: d.log });
    this.#submitter = new CallSubmitter({
      dispatcherId: d.dispatcherId,
      keys: d.keys,
      store: d.store,
      queues: d.queues,
      signer: d.signer,
      catalog: d.catalog,
      router: d.router,
      answers: this.#answers,
      approvalDeadlineFor: d.approvalDeadlineFor,
      audit: d.audit,
      log: d.log,
    });
  }

  /**
   * Submits a call. Returns its view: final if it ended within `waitMs`.
   * @throws FleetError (BAD_REQUEST / PAYLOAD_TOO_LARGE for arguments over the limits, OUT_OF_SCOPE, TOOL_NOT_FOUND,
   *   NO_WORKER, SCHEMA_VALIDATION, APPROVAL_DENIED, NOT_SPECULATABLE, IDEMPOTENCY_CONFLICT, UNAVAILABLE).
   */
  async submit(request: SubmitCallRequest, caller: Caller, waitMs: number, signal?: AbortSignal, trace?: TraceCarrier): Promise<CallView> {
    const call: ToolCall = { id: request.id ?? randomUUID(), name: request.name, arguments: request.arguments };
    const span = this.#tracer?.dispatch(call, trace);
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
    try {
      const admitted = await this.#admission.admit(call, request, caller);
      return await this.#submitter.submit({ call, admitted, request, caller, waitMs, signal, trace });
    } catch (error) {
      // The same id again answers for its call even while its tool has no worker (its MCP server is down): a caller
      // told NO_WORKER "then call again" would otherwise run again a call that had already run.
      if (request.id !== undefined && isFleetError(error) && (error.code === 'NO_WORKER' || error.code === 'TOOL_NOT_FOUND')) {
        const existing = await this.#submitter.existing(call, caller, waitMs, signal);
        if (existing !== undefined) return existing;
      }
      throw error;
    }
  }

  /**
   * Hears the progress reports of a call while this dispatcher waits for it
   * (it submitted the call, or a `get` with a wait is under way). Returns the unsubscription.
   */
  onProgress(id: string, listener: (progress: CallProgress) => void): () => void {
    return this.#inbox.onProgress(id, listener);
  }

  /**
   * The call's view, waiting up to `waitMs` for it to end.
   * @throws CallNotFoundError
   */
  get(id: string, waitMs: number, caller: Caller, signal?: AbortSignal): Promise<CallView> {
    return this.#answers.get(id, waitMs, caller, signal);
  }

  /**
   * Cancels a call: a queued one ends now; a running one has its handler's
   * signal fired and ends when the worker confirms.
   * @throws CallNotFoundError
   */
  cancel(id: string, caller: Caller): Promise<CallView> {
    return this.#answers.cancel(id, caller);
  }
}
