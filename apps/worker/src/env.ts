import { DEFAULT_FLEET_PREFIX, FLEET_PREFIX_PATTERN, parseConfig, RedisUrl } from '@forge-fleet/shared';
import { z } from 'zod';

const int = (def: number) => z.coerce.number().int().positive().default(def);

/** The worker's environment. Parsed once in main.ts; nothing else reads `process.env`. */
export const WorkerEnv = z.object({
  /** Where the fleet's Redis is. Required: workers join an existing fleet. */
  REDIS_URL: RedisUrl,
  /** Namespaces every key and queue, so several fleets can share a Redis. @defaultValue "forge" */
  FORGE_PREFIX: z.string().regex(FLEET_PREFIX_PATTERN).default(DEFAULT_FLEET_PREFIX),
  /** BullMQ lock: a dead worker's call is detected within about this long. @defaultValue 15000 */
  FORGE_LOCK_DURATION_MS: int(15_000).pipe(z.number().max(30_000, 'keep the lock at most 30000 ms so lost calls are noticed quickly')),
  /** Catalog lease, renewed every third of it. @defaultValue 15000 */
  FORGE_LEASE_MS: int(15_000),
  /** On SIGTERM, active calls get this long to finish before they are aborted. @defaultValue 10000 */
  FORGE_SHUTDOWN_GRACE_MS: int(10_000),
  /** How long call records and results are kept. @defaultValue 86400000 (24 h) */
  FORGE_RESULT_RETENTION_MS: int(86_400_000),
  /** Runs of a retryable tool in all. @defaultValue 3 */
  FORGE_RETRY_ATTEMPTS: int(3),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
});
export type WorkerEnv = z.infer<typeof WorkerEnv>;

export function parseWorkerEnv(env: NodeJS.ProcessEnv): Readonly<WorkerEnv> {
  return parseConfig(WorkerEnv, env, 'worker environment');
}
