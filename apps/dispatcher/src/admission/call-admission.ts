import { admitToolCall, type ApprovalHandler, NotSpeculatableError, type RiskSignalQueue, type SubmitCallRequest, type ToolCall } from '@forge-fleet/shared';
import type { DecisionAudit } from '../audit/decisions.js';
import type { Caller } from '../auth/authenticator.js';
import type { CatalogView } from '../catalog/catalog-view.js';
import { type ArgumentLimits, checkArguments } from '../limits/arguments.js';

export interface CallAdmissionDeps {
  readonly catalog: CatalogView;
  readonly approval: ApprovalHandler;
  readonly risk: RiskSignalQueue;
  readonly limits: ArgumentLimits;
  /** Receives every rejection: one entry per refused call. */
  readonly audit: DecisionAudit;
}

/** A call the dispatcher let in: approved (possibly modified), or waiting for a person. */
export type Admitted = Awaited<ReturnType<typeof admitToolCall>>;

/**
 * Where a call is admitted: argument limits, the catalog lookup (refreshed
 * when the name is unknown or unserved), then the shared pipeline — scope →
 * schema → approval (arguments it substitutes: limits, then schema) →
 * confirmation — and the speculation rule. Every refusal is audited here,
 * with its code, before it is thrown.
 */
export class CallAdmission {
  readonly #d: CallAdmissionDeps;

  constructor(deps: CallAdmissionDeps) {
    this.#d = deps;
  }

  /**
   * @throws FleetError (BAD_REQUEST / PAYLOAD_TOO_LARGE for arguments over the limits, OUT_OF_SCOPE, TOOL_NOT_FOUND,
   *   NO_WORKER, SCHEMA_VALIDATION, APPROVAL_DENIED, NOT_SPECULATABLE).
   */
  async admit(call: ToolCall, request: Pick<SubmitCallRequest, 'speculative'>, caller: Caller): Promise<Admitted> {
    const d = this.#d;
    let admission: Admitted;
    try {
      checkArguments(call.arguments, d.limits);
      await d.catalog.ensure(call.name);
      // No audit sink here: the dispatcher writes the one entry per call itself, rejections included.
      admission = await admitToolCall(call, {
        lookup: (name) => d.catalog.lookup(name),
        // Arguments an approval handler substitutes meet the same limits, with the same answer.
        checkArguments: (args) => checkArguments(args, d.limits),
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
      await d.audit.rejectedCall(caller, call.id, call.name, error, definition.tier);
      throw error;
    }
    return admission;
  }
}
