import { z } from 'zod';
import { Tier } from '../tiers/tier.js';
import { ToolCall, ToolResult } from '../tools/call.js';
import { PoolName } from '../tools/definition.js';
import { CallProgress } from '../tools/progress.js';
import { CallStatus } from './call-view.js';

/** A dispatcher's signature over a call (see signing/call-signature.ts). */
export const CallSignature = z.object({
  alg: z.string(),
  /** Epoch ms after which the signature no longer holds: a job replayed later is refused. */
  validUntil: z.number().int(),
  /** Base64url MAC over the call's canonical text. */
  mac: z.string(),
});
export type CallSignature = z.infer<typeof CallSignature>;

/** How the call was approved, as the dispatcher's approval step decided (signed with the call). */
export const ApprovalRecord = z.object({
  decision: z.enum(['approved', 'modified']),
  /** Who decided, when a person did. */
  by: z.string().optional(),
});
export type ApprovalRecord = z.infer<typeof ApprovalRecord>;

/**
 * A call as it travels on a tier queue, from dispatcher to worker. Dispatchers
 * and workers deploy separately: within a version, fields are only ever added,
 * and only as optional.
 */
export const CallEnvelope = z.object({
  v: z.literal(1),
  call: ToolCall,
  tier: Tier,
  pool: PoolName.optional(),
  /** The dispatcher instance whose reply list receives the result. */
  replyTo: z.string().min(1),
  /** Epoch ms when the dispatcher enqueued the call. */
  enqueuedAt: z.number().int(),
  /** Epoch ms after which the call must not start (it fails with `EXPIRED`). */
  deadline: z.number().int().optional(),
  /** Who asked, for logs and audit. */
  caller: z.string().optional(),
  /**
   * This submission's random token, also written to the call record. The
   * record and the job leave in one write without waiting for each other, so
   * a second submission of a taken id still enqueues a job: the worker skips
   * any job whose token is not the record's.
   */
  token: z.string().min(1).optional(),
  approval: ApprovalRecord.optional(),
  /**
   * W3C trace context of the dispatcher's span, so the worker's span joins the
   * caller's trace. Not signed: it decides nothing a worker does, and a forged
   * one could only mislabel a trace.
   */
  trace: z.object({ traceparent: z.string().max(64), tracestate: z.string().max(512).optional() }).optional(),
  /** The dispatcher's signature; a worker runs nothing without a valid one. */
  sig: CallSignature.optional(),
});
export type CallEnvelope = z.infer<typeof CallEnvelope>;

/**
 * Several calls for one queue in one job: under load the dispatcher groups
 * the calls it admits in the same moment, so BullMQ's per-job work is paid
 * once per batch instead of once per call. Each call keeps its own record,
 * result, retries and loss detection.
 */
export const CallBatch = z.object({
  v: z.literal(1),
  batch: z.array(CallEnvelope).min(1),
});
export type CallBatch = z.infer<typeof CallBatch>;

/** What a worker pushes onto a dispatcher's reply list when a call ends. */
export const ResultReply = z.object({
  v: z.literal(1),
  id: z.string(),
  status: CallStatus,
  result: ToolResult,
});
export type ResultReply = z.infer<typeof ResultReply>;

/**
 * What a worker pushes onto the reply lists of the dispatchers waiting for a
 * running call when its tool reports progress. It travels the same list as
 * the result, so a dispatcher never hears progress after the end.
 */
export const ProgressReply = z.object({
  v: z.literal(1),
  id: z.string(),
  progress: CallProgress,
});
export type ProgressReply = z.infer<typeof ProgressReply>;

/** Anything on a reply list. (`status` tells a result from progress.) */
export const ReplyMessage = z.union([ResultReply, ProgressReply]);
export type ReplyMessage = z.infer<typeof ReplyMessage>;
