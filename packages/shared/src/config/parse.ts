import { z } from 'zod';
import { ConfigInvalidError } from '../errors/errors.js';

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

/** `REDIS_URL`, required, with a message that says what to set. */
export const RedisUrl = z
  .string({ error: 'set REDIS_URL to the fleet Redis, e.g. redis://127.0.0.1:6379' })
  .min(1, 'set REDIS_URL to the fleet Redis, e.g. redis://127.0.0.1:6379');
