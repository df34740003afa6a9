import { ConfigInvalidError } from '@forge-fleet/shared';
import { z } from 'zod';
import { MAX_MESSAGE_BYTES } from './answer-lines.js';
import { SecretValue } from './secret-value.js';
import type { ServerSandbox } from './server-sandbox.js';

/**
 * The pool's defaults, in one place: the schemas below and the servers file
 * (servers-file.ts) read them from here.
 */
export const POOL_DEFAULTS = Object.freeze({
  startupTimeoutMs: 30_000,
  instances: Object.freeze({ min: 1, max: 4 }),
  callsPerInstance: 8,
  idleMs: 300_000,
  session: 'shared' as const,
  callTimeoutMs: 60_000,
  pingTimeoutMs: 5_000,
  restart: Object.freeze({ initialDelayMs: 250, maxDelayMs: 30_000, stableAfterMs: 10_000, crashLoopFailures: 5, crashLoopWindowMs: 60_000 }),
});

/**
 * How to start one stdio MCP server process. The environment is exactly
 * {@link McpStdioLaunch.env}: nothing of the worker's own environment reaches the
 * server, so the command is looked up on the `PATH` given here (or the
 * system's default path when none is given).
 */
export const McpStdioLaunch = z.object({
  /** The program, absolute or looked up on `env.PATH`. */
  command: z.string().min(1),
  /**
   * Its arguments.
   * @defaultValue []
   */
  args: z.array(z.string()).default([]),
  /** Its working directory; the worker's own when absent. */
  cwd: z.string().min(1).optional(),
  /**
   * Its whole environment, already resolved (values from files or the worker's environment are read by the caller).
   * @defaultValue {}
   */
  env: z.record(z.string(), z.string()).default({}),
  /**
   * How long a process may take from spawn to answering `initialize`, in milliseconds.
   * @defaultValue 30000
   */
  startupTimeoutMs: z.number().int().positive().default(POOL_DEFAULTS.startupTimeoutMs),
  /**
   * The most bytes one message of the server may take (see answer-lines.ts): the worker raises it with a
   * FORGE_MAX_RESULT_BYTES above the default, so that a result the fleet would keep is never cut short here.
   * @defaultValue 16 MiB
   */
  maxMessageBytes: z.number().int().positive().default(MAX_MESSAGE_BYTES),
  /** The values of `env` that are secrets (from the worker's environment or files): redacted from its stderr wherever that is shown. */
  secrets: z.array(z.string()).optional(),
  /** Platform/Embedded tiers: the confinement the process runs in (see server-sandbox.ts); absent on the host tier. */
  sandbox: z.custom<ServerSandbox>((v) => typeof v === 'object' && v !== null).optional(),
});
export type McpStdioLaunch = z.infer<typeof McpStdioLaunch>;

/**
 * How to reach one Streamable HTTP MCP server. `headers` are resolved values:
 * a {@link SecretValue} (from a file or the worker's environment) or a literal
 * from the servers file. They are sent with every request and appear in no
 * message, event or log line (see http-instance.ts).
 */
export const McpHttpLaunch = z.object({
  /** The upstream's MCP endpoint; credentials belong in `headers`, not in the URL. */
  url: z.url({ protocol: /^https?$/ }),
  /** @defaultValue {} */
  headers: z.record(z.string(), z.union([z.string(), z.instanceof(SecretValue)])).default({}),
  /** From the first request to a completed `initialize`. @defaultValue 30000 */
  startupTimeoutMs: z.number().int().positive().default(POOL_DEFAULTS.startupTimeoutMs),
  /**
   * The most bytes one message of the server may take (see answer-lines.ts): the worker raises it with a
   * FORGE_MAX_RESULT_BYTES above the default, so that a result the fleet would keep is never cut short here.
   * @defaultValue 16 MiB
   */
  maxMessageBytes: z.number().int().positive().default(MAX_MESSAGE_BYTES),
});
export type McpHttpLaunch = z.infer<typeof McpHttpLaunch>;

/**
 * How the pool reaches its server: a stdio process per instance
 * ({@link McpStdioLaunch}, told by `command`) or a Streamable HTTP session per
 * instance ({@link McpHttpLaunch}, told by `url`). Strict, so that a stray key
 * of the other kind is an error rather than silently dropped.
 */
export const McpLaunch = z.union([McpStdioLaunch.strict(), McpHttpLaunch.strict()]);
export type McpLaunch = z.infer<typeof McpLaunch>;

/** Whether `launch` reaches a Streamable HTTP upstream. */
export function isHttpLaunch(launch: McpLaunch): launch is McpHttpLaunch {
  return 'url' in launch;
}

/** The options of one server's pool of warm instances on one worker. */
export const McpServerPoolOptions = z
  .object({
    /** The server's name, used in messages and events. */
    server: z.string().min(1),
    launch: McpLaunch,
    instances: z
      .object({
        /**
         * Instances kept running even when no call needs them.
         * @defaultValue 1
         */
        min: z.number().int().nonnegative().default(POOL_DEFAULTS.instances.min),
        /**
         * Most instances running at once.
         * @defaultValue 4
         */
        max: z.number().int().positive().default(POOL_DEFAULTS.instances.max),
        /**
         * Calls one instance serves at the same time; further calls wait for a free slot.
         * @defaultValue 8
         */
        callsPerInstance: z.number().int().positive().default(POOL_DEFAULTS.callsPerInstance),
        /**
         * How long an instance goes without calls before it is retired: in `perCaller` mode its caller's session
         * ends with it (its state belongs to that caller); in `shared` mode only instances above `min` retire.
         * @defaultValue 300000
         */
        idleMs: z.number().int().positive().default(POOL_DEFAULTS.idleMs),
      })
      .prefault({}),
    /**
     * `shared`: any instance serves any call. `perCaller`: an instance serves one caller at a time and all of that
     * caller's calls go to it, so a stateful server's state never crosses callers.
     * @defaultValue 'shared'
     */
    session: z.enum(['shared', 'perCaller']).default(POOL_DEFAULTS.session),
    /**
     * How long one call may run, in milliseconds, when the call gives no timeout of its own.
     * @defaultValue 60000
     */
    callTimeoutMs: z.number().int().positive().default(POOL_DEFAULTS.callTimeoutMs),
    /**
     * After a call times out, how long the instance has to answer a `ping`; one that does not is replaced.
     * @defaultValue 5000
     */
    pingTimeoutMs: z.number().int().positive().default(POOL_DEFAULTS.pingTimeoutMs),
    restart: z
      .object({
        /**
         * Wait before replacing an instance after the first failure in a row, in milliseconds; doubles with each further one.
         * @defaultValue 250
         */
        initialDelayMs: z.number().int().nonnegative().default(POOL_DEFAULTS.restart.initialDelayMs),
        /**
         * The longest wait between restarts, in milliseconds.
         * @defaultValue 30000
         */
        maxDelayMs: z.number().int().nonnegative().default(POOL_DEFAULTS.restart.maxDelayMs),
        /**
         * An instance that ran this long before it died ends a run of failures: the next wait is the initial one again.
         * @defaultValue 10000
         */
        stableAfterMs: z.number().int().nonnegative().default(POOL_DEFAULTS.restart.stableAfterMs),
        /**
         * Failures (deaths, failed starts, unresponsive instances) within {@link windowMs} that stop the pool for good.
         * @defaultValue 5
         */
        crashLoopFailures: z.number().int().positive().default(POOL_DEFAULTS.restart.crashLoopFailures),
        /**
         * The window {@link crashLoopFailures} are counted in, in milliseconds.
         * @defaultValue 60000
         */
        crashLoopWindowMs: z.number().int().positive().default(POOL_DEFAULTS.restart.crashLoopWindowMs),
      })
      .prefault({}),
  })
  .check((ctx) => {
    const { min, max } = ctx.value.instances;
    if (min > max) ctx.issues.push({ code: 'custom', input: ctx.value.instances, path: ['instances', 'min'], message: `min (${min}) is above max (${max})` });
    const { initialDelayMs, maxDelayMs } = ctx.value.restart;
    if (initialDelayMs > maxDelayMs) ctx.issues.push({ code: 'custom', input: ctx.value.restart, path: ['restart', 'initialDelayMs'], message: `initialDelayMs (${initialDelayMs}) is above maxDelayMs (${maxDelayMs})` });
  });
export type McpServerPoolOptions = z.infer<typeof McpServerPoolOptions>;

/**
 * Checks and completes pool options once, before any process starts.
 *
 * @throws ConfigInvalidError naming each failing option by its path.
 */
export function resolveMcpServerPoolOptions(options: z.input<typeof McpServerPoolOptions>): Readonly<McpServerPoolOptions> {
  const r = McpServerPoolOptions.safeParse(options);
  if (!r.success) {
    const problems = r.error.issues.flatMap((issue) => problemsOf(issue, options));
    throw new ConfigInvalidError(`MCP server pool options${typeof options.server === 'string' ? ` of '${options.server}'` : ''}`, problems, { cause: r.error });
  }
  return Object.freeze(r.data);
}

/**
 * One issue as `path: message`. A `launch` that fits neither kind is described
 * by the kind it was meant to be (`url` given: HTTP), not as a bare "invalid input".
 */
function problemsOf(issue: z.core.$ZodIssue, options: z.input<typeof McpServerPoolOptions>): string[] {
  const where = (path: readonly PropertyKey[]): string => (path.length === 0 ? '(root)' : path.map(String).join('.'));
  if (issue.code === 'invalid_union' && where(issue.path) === 'launch') {
    const launch: object = typeof options.launch === 'object' && options.launch !== null ? options.launch : {};
    if ('url' in launch && 'command' in launch) return ['launch: a server is reached by `command` (stdio) or `url` (Streamable HTTP), not both'];
    const meant = 'url' in launch ? 1 : 0;
    const branch = issue.errors[meant] ?? [];
    if (branch.length > 0) return branch.map((i) => `${where([...issue.path, ...i.path])}: ${i.message}`);
  }
  return [`${where(issue.path)}: ${issue.message}`];
}
