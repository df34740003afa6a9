import { envInt, FleetEnv, parseConfig } from '@forge-fleet/shared';
import { z } from 'zod';

/** The worker's environment. Parsed once in main.ts; nothing else reads `process.env`. */
export const WorkerEnv = FleetEnv.extend({
  /** BullMQ lock: a dead worker's call is detected within about this long. @defaultValue 15000 */
  FORGE_LOCK_DURATION_MS: envInt(15_000).pipe(z.number().max(30_000, 'keep the lock at most 30000 ms so lost calls are noticed quickly')),
  /** Catalog lease, renewed every third of it. @defaultValue 15000 */
  FORGE_LEASE_MS: envInt(15_000),
  /** Runs of a retryable tool in all, runs lost with a worker included. @defaultValue 3 */
  FORGE_RETRY_ATTEMPTS: envInt(3),
  /** First retry delay, doubled for each further retry. @defaultValue 200 */
  FORGE_RETRY_BACKOFF_MS: envInt(200),
});
export type WorkerEnv = z.infer<typeof WorkerEnv>;

export function parseWorkerEnv(env: NodeJS.ProcessEnv): Readonly<WorkerEnv> {
  return parseConfig(WorkerEnv, env, 'worker environment');
}
