import { z } from 'zod';
import { ToolCallId, ToolResult } from '../tools/call.js';
import { CallProgress } from '../tools/progress.js';

/** Where a call is in its life. `completed`, `failed` and `cancelled` are final. */
export const CallStatus = z.enum(['queued', 'running', 'awaiting_approval', 'completed', 'failed', 'cancelled']);
export type CallStatus = z.infer<typeof CallStatus>;

/** Statuses a call never leaves. */
export const FINAL_STATUSES: ReadonlySet<CallStatus> = new Set(['completed', 'failed', 'cancelled']);

export function isFinalStatus(status: CallStatus): boolean {
  return FINAL_STATUSES.has(status);
}

/**
 * A call as the HTTP API answers with it. `result` is present once the
 * status is final (a cancelled call has an error result with code `CANCELLED`).
 */
export const CallView = z.object({
  id: ToolCallId,
  status: CallStatus,
  result: ToolResult.optional(),
  /** Why the call waits, when `awaiting_approval`. */
  reason: z.string().optional(),
  /** The tool's latest progress report, while the call runs (and kept after it ends). */
  progress: CallProgress.optional(),
});
export type CallView = z.infer<typeof CallView>;

/** `POST /v1/calls` body. */
export const SubmitCallRequest = z.strictObject({
  /** Choose it to make submission idempotent; generated when absent. */
  id: ToolCallId.optional(),
  name: z.string().min(1).max(128),
  arguments: z.record(z.string(), z.unknown()).default({}),
  /** A call still queued this many milliseconds after submission is never executed; it fails with `EXPIRED`. */
  expireAfterMs: z.number().int().positive().max(7 * 24 * 3600 * 1000).optional(),
  /**
   * Run it ahead of need (the agent may discard the result): accepted only
   * for tools flagged `speculatable`, and never sent to a person.
   */
  speculative: z.boolean().optional(),
});
export type SubmitCallRequest = z.infer<typeof SubmitCallRequest>;

/** The longest `?wait=` the HTTP API accepts, in milliseconds. */
export const MAX_WAIT_MS = 60_000;

/** Most calls one `POST /v1/calls/batch` request may carry. */
export const MAX_BATCH_CALLS = 256;

/** `POST /v1/calls/batch` body: several calls, each answered on its own NDJSON line as it ends. */
export const SubmitBatchRequest = z.strictObject({
  calls: z.array(z.unknown()).min(1).max(MAX_BATCH_CALLS, `at most ${MAX_BATCH_CALLS} calls per batch`),
});
export type SubmitBatchRequest = z.infer<typeof SubmitBatchRequest>;
