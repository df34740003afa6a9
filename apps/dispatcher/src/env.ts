import { envInt, FleetEnv, parseConfig } from '@forge-fleet/shared';
import { z } from 'zod';


/** JSON in an environment variable, parsed then checked by `schema`. */
function json<T extends z.ZodType>(schema: T, fallback: z.input<T>) {
  return z
    .string()
    .optional()
    .transform((text, ctx) => {
      if (text === undefined || text.trim() === '') return fallback;
      try {
        return JSON.parse(text) as unknown;
      } catch {
        ctx.addIssue({ code: 'custom', message: 'is not valid JSON' });
        return z.NEVER;
      }
    })
    .pipe(schema);
}

/** The dispatcher's environment. Parsed once in main.ts; nothing else reads `process.env`. */
export const DispatcherEnv = FleetEnv.extend({
  /** @defaultValue 8080 */
  PORT: z.coerce.number().int().min(0).max(65_535).default(8080),
  /** @defaultValue 127.0.0.1 (set 0.0.0.0 to listen on every interface) */
  HOST: z.string().default('127.0.0.1'),
  /** Largest request body. @defaultValue 1048576 */
  FORGE_BODY_LIMIT_BYTES: envInt(1_048_576),
  /**
   * The approval policy: `tier` (platform and embedded approved, host only with an
   * API key granting the tool), `auto` (everything; development only), `deny`.
   * @defaultValue "tier"
   */
  FORGE_APPROVAL: z.enum(['tier', 'auto', 'deny']).default('tier'),
  /** API keys: `{"<key>": {"subject": "ops", "tools": ["http_get", "db.*"]}}`. @defaultValue none */
  FORGE_API_KEYS: json(
    z
      .record(z.string(), z.object({ subject: z.string().min(1), tools: z.array(z.string()) }))
      .refine((keys) => Object.keys(keys).every((k) => k.length >= 16), 'API keys must be at least 16 characters'),
    {},
  ),
  /** Scopes per task type (the `x-forge-task` header): `{"research": ["search.*", "clock"]}`. */
  FORGE_SCOPES: json(z.record(z.string().min(1), z.array(z.string())), {}),
  /** Scope of callers that name no task type, as patterns; `["*"]` admits everything. @defaultValue ["*"] */
  FORGE_DEFAULT_SCOPE: json(z.array(z.string()), ['*']),
  /** How often the live catalog is re-read. @defaultValue 1000 */
  FORGE_CATALOG_REFRESH_MS: envInt(1000),
});
export type DispatcherEnv = z.infer<typeof DispatcherEnv>;

export function parseDispatcherEnv(env: NodeJS.ProcessEnv): Readonly<DispatcherEnv> {
  return parseConfig(DispatcherEnv, env, 'dispatcher environment');
}
