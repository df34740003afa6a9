import { envInt, FleetEnv, LOST_KEY_PROBLEM, lostKeyPaths, parseConfig, RedisUrl, textFromEnv } from '@forge-fleet/shared';
import { z } from 'zod';
import { ToolPattern } from './approvals/policy-file.js';

/**
 * JSON in an environment variable, parsed then checked by `schema`. Every
 * problem becomes an issue at the variable (and the path inside its value),
 * with the shape it should have, so a bad value stops the dispatcher with
 * one `CONFIG_INVALID` line naming it.
 *
 * @param expected what the variable takes, for the message: `a JSON array of tool patterns, e.g. ["*"]`.
 */
function json<T extends z.ZodType>(schema: T, fallback: z.output<T>, expected: string) {
  return z
    .string()
    .optional()
    .transform((text, ctx): z.output<T> => {
      if (text === undefined || text.trim() === '') return fallback;
      let value: unknown;
      try {
        value = JSON.parse(text);
      } catch (error) {
        ctx.addIssue({ code: 'custom', message: `is not valid JSON (${error instanceof Error ? error.message : String(error)}); it takes ${expected}` });
        return z.NEVER;
      }
      const lost = lostKeyPaths(value);
      if (lost.length > 0) {
        for (const path of lost) ctx.addIssue({ code: 'custom', path, message: `${LOST_KEY_PROBLEM}; it takes ${expected}` });
        return z.NEVER;
      }
      const parsed = schema.safeParse(value);
      if (parsed.success) return parsed.data;
      for (const issue of parsed.error.issues) ctx.addIssue({ code: 'custom', path: issue.path, message: `${issue.message}; it takes ${expected}` });
      return z.NEVER;
    });
}

/** An optional whole number (empty means unset): its default lives with the option it sets. */
const optionalInt = (min: number) => z.preprocess((v) => (v === '' ? undefined : v), z.coerce.number().int().min(min).optional());

/** A comma-separated list (empty means unset). */
const optionalList = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === '' ? undefined : v.split(',').map((s) => s.trim()).filter((s) => s !== '')));

/** The dispatcher's environment. Parsed once in main.ts; nothing else reads `process.env`. */
export const DispatcherEnv = FleetEnv.extend({
  /** @defaultValue 8080 */
  PORT: z.coerce.number().int().min(0).max(65_535).default(8080),
  /** @defaultValue 127.0.0.1 (set 0.0.0.0 to listen on every interface) */
  HOST: z.string().default('127.0.0.1'),
  /** Largest request body. @defaultValue 1048576 */
  FORGE_BODY_LIMIT_BYTES: envInt(1_048_576),
  /** Most bytes of one call's arguments as JSON (a larger call is refused with 413 PAYLOAD_TOO_LARGE). @defaultValue 262144 */
  FORGE_MAX_ARGUMENT_BYTES: envInt(262_144),
  /** Deepest nesting of objects/arrays in a call's arguments (deeper is refused with 400 BAD_REQUEST). @defaultValue 32 */
  FORGE_MAX_JSON_DEPTH: envInt(32),
  /**
   * The Redis URL `GET /v1/audit` reads the audit stream through. Under the fleet's ACL
   * (infra/redis) the dispatcher's user may only append to the stream; point this at a
   * user that may read it; a cluster URL like REDIS_URL's for a Redis Cluster. Empty means unset.
   * @defaultValue REDIS_URL
   */
  FORGE_AUDIT_REDIS_URL: z.preprocess((v) => (v === '' ? undefined : v), RedisUrl.optional()),
  /**
   * The approval policy: `tier` (platform and embedded approved, host only with a
   * token granting the tool), `auto` (everything; development only), `deny`.
   * @defaultValue "tier"
   */
  FORGE_APPROVAL: z.enum(['tier', 'auto', 'deny']).default('tier'),
  /**
   * The Ed25519 public key (SPKI PEM) that verifies agent capability tokens,
   * inline or as a file (`_FILE`). Required unless FORGE_DEV_MODE is on.
   */
  FORGE_TOKEN_PUBLIC_KEY: z.string().optional(),
  FORGE_TOKEN_PUBLIC_KEY_FILE: z.string().optional(),
  /** The audience tokens must be minted for. @defaultValue "forge-fleet" */
  FORGE_TOKEN_AUDIENCE: z.string().min(1).default('forge-fleet'),
  /**
   * Development only: serve requests without a token as an anonymous agent
   * (no Host-tier grants) whose scope the `x-forge-task` header picks.
   * @defaultValue false
   */
  FORGE_DEV_MODE: z
    .enum(['1', '0', 'true', 'false', ''])
    .default('')
    .transform((v) => v === '1' || v === 'true'),
  /** Scopes per task type (a token's `task` claim; `x-forge-task` in dev mode): `{"research": ["search.*", "clock"]}`. */
  FORGE_SCOPES: json(z.record(z.string().min(1), z.array(ToolPattern)), {}, 'a JSON object of task types to arrays of tool patterns (names, "prefix.*" or "*"), e.g. {"research": ["search.*", "clock"]}'),
  /** Scope of callers that name no task type, as patterns; `["*"]` admits everything. @defaultValue ["*"] */
  FORGE_DEFAULT_SCOPE: json(z.array(ToolPattern), ['*'], 'a JSON array of tool patterns (names, "prefix.*" or "*"), e.g. ["*"] or ["search.*", "clock"]'),
  /**
   * A policy file (JSON or YAML; see approvals/policy-file.ts): approval handler,
   * tools that need a person, deadlines, scopes. Replaces FORGE_APPROVAL,
   * FORGE_SCOPES, FORGE_DEFAULT_SCOPE and FORGE_APPROVAL_DEADLINE_MS (setting both is refused).
   */
  FORGE_POLICY_FILE: z.string().min(1).optional(),
  /** How long a call waits for a person's decision before it ends as EXPIRED. @defaultValue 900000 (15 min) */
  FORGE_APPROVAL_DEADLINE_MS: envInt(900_000),
  /** How often the live catalog is re-read. @defaultValue 1000 */
  FORGE_CATALOG_REFRESH_MS: envInt(1000),
  /** Longest a client may take to send a request's headers. @defaultValue 10000 (http/door-options.ts) */
  FORGE_HEADERS_TIMEOUT_MS: optionalInt(1),
  /** Longest a client may take to send a request's body after its headers (not the wait for a result). @defaultValue 30000 */
  FORGE_BODY_TIMEOUT_MS: optionalInt(1),
  /** Most connections open at once. @defaultValue 4096, below the process's open-file limit */
  FORGE_MAX_CONNECTIONS: optionalInt(1),
  /** Most connections open at once that have not shown a valid token yet. @defaultValue 512 */
  FORGE_MAX_UNAUTHENTICATED_CONNECTIONS: optionalInt(1),
  /**
   * Host names `/v1` and `/mcp` answer to, comma-separated (`name` for any port, `name:port`, `*` for any).
   * @defaultValue localhost,127.0.0.1,[::1] when HOST is a loopback address; any Host otherwise
   */
  FORGE_ALLOWED_HOSTS: optionalList,
  /** Browser origins allowed besides the dispatcher's own, comma-separated (`https://console.example.com`, `*`). @defaultValue none */
  FORGE_ALLOWED_ORIGINS: optionalList,
  /** How far ahead of this clock a token's `iat` and `nbf` may be, in seconds. @defaultValue 60 */
  FORGE_TOKEN_CLOCK_SKEW_S: optionalInt(0),
});
export type DispatcherEnv = z.infer<typeof DispatcherEnv>;

export function parseDispatcherEnv(env: NodeJS.ProcessEnv): Readonly<DispatcherEnv> {
  return parseConfig(
    DispatcherEnv.refine((e) => e.FORGE_DEV_MODE || e.FORGE_TOKEN_PUBLIC_KEY !== undefined || e.FORGE_TOKEN_PUBLIC_KEY_FILE !== undefined, {
      message: 'set FORGE_TOKEN_PUBLIC_KEY (or FORGE_TOKEN_PUBLIC_KEY_FILE) to verify agent tokens — `forge keys init` makes one — or FORGE_DEV_MODE=1 for anonymous development use',
      path: ['FORGE_TOKEN_PUBLIC_KEY'],
    }),
    env,
    'dispatcher environment',
  );
}

/** The token public key's PEM text, from the variable or its file. */
export function tokenPublicKeyPem(env: Readonly<DispatcherEnv>): string | undefined {
  const { FORGE_TOKEN_PUBLIC_KEY, FORGE_TOKEN_PUBLIC_KEY_FILE } = env;
  return textFromEnv({ FORGE_TOKEN_PUBLIC_KEY, FORGE_TOKEN_PUBLIC_KEY_FILE }, 'FORGE_TOKEN_PUBLIC_KEY', 'dispatcher environment');
}
