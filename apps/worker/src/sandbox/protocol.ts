import { MAX_PROGRESS_MESSAGE, WireError } from '@forge-fleet/shared';
import { z } from 'zod';

/**
 * Messages between the worker and a sandbox process: one JSON object per line
 * on file descriptor 3. stdout and stderr stay free for whatever a handler
 * prints, so nothing a handler writes can be mistaken for a reply.
 *
 * The worker only ever sends well-formed messages; the sandbox side is
 * untrusted, so only {@link SandboxReply} is parsed with a schema.
 */
export interface RunRequest {
  readonly type: 'run';
  /** This run's id within its process (several calls may run at once, even two runs of one call id). */
  readonly runId: string;
  readonly callId: string;
  readonly tool: string;
  readonly arguments: Record<string, unknown>;
  readonly attempt: number;
  readonly tier: string;
  readonly trust: string;
  /** The active skill's variables; the sandbox process itself has an empty environment. */
  readonly env: Readonly<Record<string, string>>;
}

export interface CancelRequest {
  readonly type: 'cancel';
  readonly runId: string;
  readonly reason: string;
}

/** The liveness check (see liveness.ts): the sandbox answers `pong` with the same `seq` as soon as its event loop gets to it. */
export interface PingRequest {
  readonly type: 'ping';
  readonly seq: number;
}

export type SandboxRequest = RunRequest | CancelRequest | PingRequest;

/** Limits a handler's failure can be attributed to from inside the sandbox. */
export const ReportedLimit = z.enum(['memory', 'output']);
export type ReportedLimit = z.infer<typeof ReportedLimit>;

export const SandboxReply = z.discriminatedUnion('type', [
  z.object({ type: z.literal('ready'), tools: z.array(z.string()) }),
  z.object({ type: z.literal('pong'), seq: z.number().int() }),
  // The result is checked against ToolResult by runExecutor, as for any custom executor: its content blocks
  // are checked again there (ContentBlock), whatever the sandbox's own copy of the checks let through.
  z.object({ type: z.literal('result'), runId: z.string(), result: z.unknown() }),
  // A FleetError thrown by the handler keeps its code across the boundary.
  z.object({ type: z.literal('fleet-error'), runId: z.string(), error: WireError }),
  // Anything else thrown: only its reason crosses, as runExecutor reports it in-process.
  z.object({ type: z.literal('thrown'), runId: z.string(), reason: z.string() }),
  z.object({ type: z.literal('limit'), runId: z.string(), limit: ReportedLimit, detail: z.string() }),
  // A handler's ctx.progress; the run goes on. The worker stamps the time (the sandbox's clock is not trusted).
  z.object({
    type: z.literal('progress'),
    runId: z.string(),
    progress: z.number().finite(),
    total: z.number().finite().positive().optional(),
    message: z.string().max(MAX_PROGRESS_MESSAGE).optional(),
  }),
]);
export type SandboxReply = z.infer<typeof SandboxReply>;

/** Settings the sandbox process receives as its only command-line argument. */
export interface RuntimeConfig {
  readonly outputBytes: number;
}

/** Shortest time between two progress messages of one run leaving a sandbox process (the worker throttles further). */
export const SANDBOX_PROGRESS_INTERVAL_MS = 50;
