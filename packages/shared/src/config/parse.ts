import { z } from 'zod';
import { ConfigInvalidError } from '../errors/errors.js';
import { DEFAULT_FLEET_PREFIX, FLEET_PREFIX_PATTERN } from '../queues/names.js';
import { RedisUrl } from './redis-target.js';

/**
 * Parses options or environment variables once, at start-up, and freezes the
 * result. Every problem is reported at once, each with the variable it is about.
 *
 * @throws ConfigInvalidError listing every problem.
 */
export function parseConfig<S extends z.ZodType>(schema: S, input: unknown, what: string): Readonly<z.output<S>> {
  const parsed = schema.safeParse(input);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.length > 0 ? i.path.join('.') : '(root)'}: ${i.message}`);
    throw new ConfigInvalidError(what, problems, { cause: parsed.error });
  }
  return Object.freeze(parsed.data);
}

/** A positive whole number read from the environment, with a default. */
export const envInt = (defaultValue: number) => z.coerce.number().int().positive().default(defaultValue);

/**
 * The environment every fleet process reads (dispatchers and workers must
 * agree on these); each app extends it with its own variables.
 */
export const FleetEnv = z.object({
  /** The fleet's Redis: one server (`redis://…`) or a Redis Cluster (`redis+cluster://host:port,…`; docs/cluster.md). */
  REDIS_URL: RedisUrl,
  /** Namespaces every key and queue, so several fleets can share a Redis. @defaultValue "forge" */
  FORGE_PREFIX: z.string().regex(FLEET_PREFIX_PATTERN).default(DEFAULT_FLEET_PREFIX),
  /** How long call records and results are kept. @defaultValue 86400000 (24 h) */
  FORGE_RESULT_RETENTION_MS: envInt(86_400_000),
  /** On SIGTERM, how long active calls (worker) or requests (dispatcher) get. @defaultValue 10000 */
  FORGE_SHUTDOWN_GRACE_MS: envInt(10_000),
  /** @defaultValue "info" */
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
});
export type FleetEnv = z.infer<typeof FleetEnv>;
