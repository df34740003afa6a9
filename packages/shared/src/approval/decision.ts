import { z } from 'zod';
import { toolMatcher } from '../scope/tool-scope.js';
import type { TrustLevel } from '../scope/trust.js';
import type { Tier } from '../tiers/tier.js';
import type { ToolCall } from '../tools/call.js';
import type { ToolDefinition } from '../tools/definition.js';

/**
 * What the approval step decided about one call:
 * - `approve`: run it as it is;
 * - `deny`: refuse it, with a reason the caller sees;
 * - `modify`: run it with these arguments instead (checked against the schema again);
 * - `pending`: a person must decide; the call waits (with `arguments`, in modified form).
 */
export const ApprovalDecision = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('approve') }),
  z.object({ kind: z.literal('deny'), reason: z.string().min(1) }),
  z.object({ kind: z.literal('modify'), arguments: z.record(z.string(), z.unknown()) }),
  z.object({ kind: z.literal('pending'), reason: z.string().min(1), arguments: z.record(z.string(), z.unknown()).optional() }),
]);
export type ApprovalDecision = z.infer<typeof ApprovalDecision>;

/** Constructors for {@link ApprovalDecision}s, so handlers read as sentences. */
export const Approval = Object.freeze({
  approve: (): ApprovalDecision => ({ kind: 'approve' }),
  deny: (reason: string): ApprovalDecision => ({ kind: 'deny', reason }),
  modify: (args: Record<string, unknown>): ApprovalDecision => ({ kind: 'modify', arguments: args }),
  pending: (reason: string, args?: Record<string, unknown>): ApprovalDecision =>
    args === undefined ? { kind: 'pending', reason } : { kind: 'pending', reason, arguments: args },
});

/**
 * What a caller presents to be allowed host-tier tools: who it is and which
 * tools (exact names, `prefix.*` or `*`) it was granted.
 */
export const Authorization = z.object({
  subject: z.string().min(1),
  tools: z.array(z.string()).readonly(),
});
export type Authorization = z.infer<typeof Authorization>;

/**
 * True when the authorization grants `toolName`.
 * @throws InvalidDefinitionError when the authorization holds a malformed pattern.
 */
export function authorizationAllows(authorization: Authorization, toolName: string): boolean {
  return toolMatcher(authorization.tools)(toolName);
}

/** What an approval handler knows besides the call and its tier. */
export interface ApprovalContext {
  readonly definition: ToolDefinition;
  /** The caller's authorization, when it presented one. */
  readonly authorization?: Authorization | undefined;
  /** The trust level of the skill driving the caller. */
  readonly trust: TrustLevel;
  /** Who is calling, when known. */
  readonly caller?: string | undefined;
}

/**
 * Decides whether a call may run. It is asked after the arguments passed
 * schema validation and before anything executes; the step cannot be skipped.
 * A handler that throws counts as a denial: the step fails closed.
 */
export interface ApprovalHandler {
  check(call: ToolCall, tier: Tier, ctx: ApprovalContext): ApprovalDecision | Promise<ApprovalDecision>;
}
