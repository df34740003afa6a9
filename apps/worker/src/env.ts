import { envInt, FleetEnv, parseConfig, ProcessIsolation } from '@forge-fleet/shared';
import { z } from 'zod';

/** The worker's environment. Parsed once in main.ts; nothing else reads `process.env`. */
export const WorkerEnv = FleetEnv.extend({
  /** BullMQ lock: a dead worker's call is detected within about this long. @defaultValue 15000 */
  FORGE_LOCK_DURATION_MS: envInt(15_000).pipe(z.number().max(30_000, 'keep the lock at most 30000 ms so lost calls are noticed quickly')),
  /** Catalog lease, renewed every third of it. @defaultValue 15000 */
  FORGE_LEASE_MS: envInt(15_000),
  /** How long a starting worker waits for a dispatcher to publish its lane's key check (see WorkerPool). */
  FORGE_KEY_CHECK_WAIT_MS: envInt(3000),
  /** Runs of a retryable tool in all, runs lost with a worker included. @defaultValue 3 */
  FORGE_RETRY_ATTEMPTS: envInt(3),
  /** First retry delay, doubled for each further retry. @defaultValue 200 */
  FORGE_RETRY_BACKOFF_MS: envInt(200),
  /** Largest result a call may end with (bytes of JSON); larger ones end as RESOURCE_LIMIT. @defaultValue 1048576 */
  FORGE_MAX_RESULT_BYTES: envInt(1_048_576),
  /** Shortest time between two progress reports of one call leaving the worker (newer ones replace waiting ones). @defaultValue 200 */
  FORGE_PROGRESS_INTERVAL_MS: envInt(200),
  /**
   * Port of the worker's `/metrics`, `/healthz` and `/readyz`. `0` picks a free
   * port (logged at start; several workers on one machine never collide),
   * `off` serves nothing. Orchestrators set a fixed one (9464 in infra/).
   * @defaultValue "0"
   */
  FORGE_METRICS_PORT: z.union([z.literal('off'), z.coerce.number().int().min(0).max(65_535)]).default(0),
  /** Address the metrics port listens on. @defaultValue "0.0.0.0" */
  FORGE_METRICS_HOST: z.string().min(1).default('0.0.0.0'),
  /**
   * Platform and Embedded handlers run in sandbox processes (docs/sandbox.md).
   * `off` runs them in the worker process: for development only, never for
   * untrusted tools. Host-tier workers never sandbox (their isolation is a
   * node of their own). @defaultValue "on"
   */
  FORGE_SANDBOX: z.enum(['on', 'off']).default('on'),
  /** Warm spare sandbox processes (owned by no caller yet). @defaultValue the machine's CPU count (at least 2) */
  FORGE_SANDBOX_SIZE: z.coerce.number().int().positive().max(256).optional(),
  /**
   * Who one sandbox process may serve: `caller` (one token subject, for the
   * process's life) or `call` (one call, then the process is killed). The
   * `--sandbox-isolation` flag wins. @defaultValue "caller"
   */
  FORGE_SANDBOX_ISOLATION: ProcessIsolation.optional(),
  /** Sandbox processes at most, spares included (callers beyond it take over idle ones). @defaultValue 64 */
  FORGE_SANDBOX_MAX_PROCESSES: z.coerce.number().int().positive().max(1024).optional(),
  /** Sandbox processes one caller may hold. @defaultValue the machine's CPU count (at least 2) */
  FORGE_SANDBOX_PROCESSES_PER_CALLER: z.coerce.number().int().positive().max(1024).optional(),
  /** A caller's sandbox process idle this long is stopped. @defaultValue 60000 */
  FORGE_SANDBOX_IDLE_MS: z.coerce.number().int().positive().optional(),
  /** Calls one sandbox process runs at once (1: a process per call in flight). @defaultValue 32 */
  FORGE_SANDBOX_CALLS_PER_PROCESS: z.coerce.number().int().positive().max(1024).optional(),
  /** CPU seconds one call may use. @defaultValue 10 */
  FORGE_SANDBOX_CPU_SECONDS: z.coerce.number().positive().optional(),
  /** Memory of one sandbox process (V8 heap and data size). @defaultValue 256 */
  FORGE_SANDBOX_MEMORY_MB: z.coerce.number().int().min(16).optional(),
  /**
   * Refuse to start when the sandbox cannot put every isolation layer in
   * place on this machine (or is off), instead of logging what it could not
   * enforce. `--strict-sandbox` turns it on too.
   * @defaultValue on when NODE_ENV=production, else off
   */
  FORGE_STRICT_SANDBOX: z.enum(['1', '0', 'true', 'false']).optional(),
  NODE_ENV: z.string().optional(),
  /**
   * How long an MCP server that crash-looped rests (its tools withdrawn) before
   * a fresh pool tries it again (docs/mcp-servers.md). @defaultValue 60000
   */
  FORGE_MCP_RETRY_AFTER_MS: z.coerce.number().int().positive().optional(),
  /** Largest result one call may return. @defaultValue 1048576 */
  FORGE_SANDBOX_OUTPUT_BYTES: z.coerce.number().int().min(1024).optional(),
});
export type WorkerEnv = z.infer<typeof WorkerEnv>;

export function parseWorkerEnv(env: NodeJS.ProcessEnv): Readonly<WorkerEnv> {
  return parseConfig(WorkerEnv, env, 'worker environment');
}
