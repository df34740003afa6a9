import { toolMatcher } from '../scope/tool-scope.js';
import type { Tier } from '../tiers/tier.js';
import type { ToolCall } from '../tools/call.js';
import { Approval, type ApprovalContext, type ApprovalDecision, type ApprovalHandler, authorizationAllows } from './decision.js';

/**
 * Approves every call. For development and for fleets where every tool is
 * pre-authorised; in production prefer {@link TierBasedApproval}, which still
 * demands an authorization for host-tier tools.
 */
export class AutoApprove implements ApprovalHandler {
  check(): ApprovalDecision {
    return Approval.approve();
  }
}

/** Denies every call with one reason: maintenance windows, tests of denial paths, a fail-closed fallback. */
export class DenyAll implements ApprovalHandler {
  constructor(readonly reason: string) {}
  check(): ApprovalDecision {
    return Approval.deny(this.reason);
  }
}

/**
 * The default policy of the three-tier model: platform and embedded tools
 * (sandboxed) are approved; host tools (outside the sandbox: networks,
 * databases) are approved only when the caller's authorization grants the tool.
 */
export class TierBasedApproval implements ApprovalHandler {
  check(call: ToolCall, tier: Tier, ctx: ApprovalContext): ApprovalDecision {
    if (tier !== 'host') return Approval.approve();
    if (ctx.authorization === undefined) {
      return Approval.deny(`host-tier tool '${call.name}' runs outside the sandbox and needs an authorization that grants it; none was presented`);
    }
    if (!authorizationAllows(ctx.authorization, call.name)) {
      return Approval.deny(`the authorization of '${ctx.authorization.subject}' does not grant host-tier tool '${call.name}'`);
    }
    return Approval.approve();
  }
}

/** Approves only the listed tools (exact names, `prefix.*` or `*`). */
export class AllowList implements ApprovalHandler {
  readonly #allowed: (name: string) => boolean;
  /** @throws InvalidDefinitionError for a malformed pattern. */
  constructor(readonly patterns: readonly string[]) {
    this.#allowed = toolMatcher(patterns);
  }
  check(call: ToolCall): ApprovalDecision {
    return this.#allowed(call.name) ? Approval.approve() : Approval.deny(`tool '${call.name}' is not in the allow list`);
  }
}

/**
 * Applies the trust level of the skill driving the caller: `blocked` denies
 * everything, `quarantined` denies what leaves the sandbox (host tier).
 */
export class TrustGate implements ApprovalHandler {
  check(call: ToolCall, tier: Tier, ctx: ApprovalContext): ApprovalDecision {
    if (ctx.trust === 'blocked') return Approval.deny(`the active skill is blocked; no tool may run, '${call.name}' included`);
    if (ctx.trust === 'quarantined' && tier === 'host') {
      return Approval.deny(`the active skill is quarantined; host-tier tool '${call.name}' may not run until the skill is trusted again`);
    }
    return Approval.approve();
  }
}

/**
 * Combines handlers: every one must approve. They are asked in order; the
 * first denial ends the check; a modification is passed on to the handlers
 * after it; if any asked for a person (and none denied), the call waits.
 */
export function allOf(...handlers: readonly ApprovalHandler[]): ApprovalHandler {
  return {
    async check(call: ToolCall, tier: Tier, ctx: ApprovalContext): Promise<ApprovalDecision> {
      let current = call;
      let modified = false;
      const pending: string[] = [];
      for (const handler of handlers) {
        const decision = await handler.check(current, tier, ctx);
        switch (decision.kind) {
          case 'deny':
            return decision;
          case 'modify':
            current = { ...current, arguments: decision.arguments };
            modified = true;
            break;
          case 'pending':
            pending.push(decision.reason);
            if (decision.arguments !== undefined) {
              current = { ...current, arguments: decision.arguments };
              modified = true;
            }
            break;
          case 'approve':
            break;
        }
      }
      if (pending.length > 0) return Approval.pending(pending.join('; '), modified ? current.arguments : undefined);
      return modified ? Approval.modify(current.arguments) : Approval.approve();
    },
  };
}
