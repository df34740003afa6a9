import { z } from 'zod';
import { ToolCallId } from '../tools/call.js';

/** A call waiting for a person, as `GET /v1/approvals` lists it. */
export const PendingApproval = z.object({
  id: ToolCallId,
  tool: z.string(),
  /** The arguments as they would run if approved now. */
  arguments: z.record(z.string(), z.unknown()),
  /** The token subject that submitted the call, when known. */
  caller: z.string().optional(),
  /** The scope it was submitted under. */
  scope: z.string(),
  /** Why it waits for a person. */
  reason: z.string(),
  /** Epoch ms: undecided by then, the call ends `failed` with `EXPIRED` (fail closed). */
  deadline: z.number().int(),
  /** Epoch ms when it was submitted. */
  createdAt: z.number().int(),
});
export type PendingApproval = z.infer<typeof PendingApproval>;

/** `GET /v1/approvals` answer: pending calls, oldest first. */
export const ApprovalList = z.object({ approvals: z.array(PendingApproval) });
export type ApprovalList = z.infer<typeof ApprovalList>;

/** `POST /v1/approvals/:id` body: a person's decision on a waiting call. */
export const ApprovalDecisionRequest = z
  .strictObject({
    decision: z.enum(['approve', 'deny', 'modify']),
    /** Why; shown to the agent on a denial and kept in the audit record. */
    reason: z.string().max(2000).optional(),
    /** With `modify`: the arguments to run instead (validated against the tool's schema again). */
    arguments: z.record(z.string(), z.unknown()).optional(),
  })
  .refine((d) => (d.decision === 'modify') === (d.arguments !== undefined), { message: '`arguments` goes with decision "modify", and only with it', path: ['arguments'] });
export type ApprovalDecisionRequest = z.infer<typeof ApprovalDecisionRequest>;

/** How long a call waits for a person unless the tool or policy says otherwise. @defaultValue 15 min */
export const DEFAULT_APPROVAL_DEADLINE_MS = 15 * 60 * 1000;
