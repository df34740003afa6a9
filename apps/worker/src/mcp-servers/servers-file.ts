import { closeSync, constants, fstatSync, openSync, readFileSync, realpathSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { ConfigInvalidError, MAX_TIMEOUT_MS, PoolName, type Tier, TierInput, ToolName } from '@forge-fleet/shared';
import { z } from 'zod';
import { POOL_DEFAULTS } from './pool-options.js';
import { type ConfigValue, SecretValue } from './secret-value.js';
import { parseConfigSource, problemAt, schemaProblems, type YamlSource } from '@forge-fleet/shared/yaml-source';

/** What the servers file's errors call it. */
const WHAT = 'MCP servers file';

/** Longest tool name the fleet (and MCP) accepts; see `ToolName`. */
const MAX_TOOL_NAME = 128;

/**
 * Every default of the servers file, in one place; the schema below reads them from here.
 */
export const SERVER_DEFAULTS = Object.freeze({
  /**
   * `host`, as for `defineTool`: the tier that needs a grant for each tool, so
   * forgetting it never widens who may call the server.
   */
  tier: 'host' as const,
  /**
   * One warm instance, never more — the one default that differs from the
   * pool's: a second copy of a server nobody said may run twice can split or
   * corrupt state it keeps on disk (server-memory writes one JSON file).
   * Scaling out is the operator's call.
   */
  instances: Object.freeze({ min: POOL_DEFAULTS.instances.min, max: 1 }),
  /**
   * A `perCaller` server's most instances: one per caller served at once, so
   * more than one — 8, each caller beyond them waiting for an idle session to
   * be reaped. Such a server keeps its state per instance by definition; in a
   * sandbox each instance has a /tmp of its own, so state kept there is never
   * shared (docs/mcp-servers.md).
   */
  perCallerMax: 8,
  /** Calls one instance has in flight at once: MCP multiplexes requests on one connection, and servers written as a loop just queue them. */
  callsPerInstance: POOL_DEFAULTS.callsPerInstance,
  /** Long enough for `npx`/`uvx` to fetch a package on a cold cache (10–15 s is common), short enough that a hung start is seen. */
  startupTimeoutMs: POOL_DEFAULTS.startupTimeoutMs,
  /** The first restart after a crash waits this long, doubling up to `maxMs`, so a crash loop costs little CPU. */
  restartBackoff: Object.freeze({ initialMs: POOL_DEFAULTS.restart.initialDelayMs, maxMs: POOL_DEFAULTS.restart.maxDelayMs }),
  /**
   * This many failures (deaths, failed starts, unresponsive instances) within
   * `windowMs` stop the pool: its tools are withdrawn until it is tried again
   * (FORGE_MCP_RETRY_AFTER_MS). A server that is slow to settle may need more.
   */
  crashLoop: Object.freeze({ failures: POOL_DEFAULTS.restart.crashLoopFailures, windowMs: POOL_DEFAULTS.restart.crashLoopWindowMs }),
  /** `shared`: any instance serves any call; right for stateless servers, which most are. */
  session: POOL_DEFAULTS.session,
  /**
   * Instances idle this long are stopped (a `perCaller` caller's instance, or
   * a `shared` instance above `min`). Five minutes: an agent thinks for
   * minutes between calls, and a reaped browser or database session loses its work.
   */
  idleMs: POOL_DEFAULTS.idleMs,
});

const int = () => z.number().int();
/**
 * The longest wait a timer can hold: Node's timers take a 32-bit signed count
 * of milliseconds (about 24.8 days), and one set past it fires at once, again
 * and again, for ever. Every duration of the file that becomes a timer is bounded by it.
 */
const MAX_TIMER_MS = 2_147_483_647;
const duration = () => int().max(MAX_TIMER_MS);

/** A server's name in the file: it names the server in logs, metrics and `/readyz`, and is its tools' prefix unless `prefix` says otherwise. */
export const ServerName = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'must be 1-64 characters of letters, digits, "_" or "-"; rename the server (its name is also its tools\' prefix unless it sets `prefix`)');

/**
 * What a server's tools are prefixed with (`prefix.tool_name`). No `.`, so the
 * scope pattern `prefix.*` selects one server's tools and never another's;
 * at most 64 characters, leaving at least 63 for the tool's own name.
 */
export const ToolPrefix = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'must be 1-64 characters of letters, digits, "_" or "-" (no ".": "prefix.*" must select one server)');

/** A name in a server's `env`: what a process environment accepts and a shell could name. */
const EnvName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be letters, digits and "_", not starting with a digit');

/** Headers the Streamable HTTP transport sets itself: a file that set them would break the session, not configure it. */
const TRANSPORT_HEADERS = new Set(['accept', 'content-type', 'content-length', 'host', 'connection', 'transfer-encoding', 'mcp-session-id', 'mcp-protocol-version', 'last-event-id']);

const HeaderName = z
  .string()
  .regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/, 'must be an HTTP header name')
  .superRefine((name, ctx) => {
    if (TRANSPORT_HEADERS.has(name.toLowerCase())) ctx.addIssue({ code: 'custom', message: `"${name}" is set by the MCP transport itself; remove it` });
  });

/**
 * An `env` or `headers` value: a literal, or taken at load from the worker's
 * environment (`{ fromEnv: NAME }`) or a file (`{ fromFile: PATH }`, relative
 * to the servers file; one trailing newline dropped). Taken values are secrets
 * (see {@link SecretValue}): errors name the variable or file, never the value.
 */
/**
 * The most bytes one argument or one environment entry (`NAME=value`) may
 * take: the kernel's MAX_ARG_STRLEN (128 KiB, its terminating NUL included).
 * A longer one fails the server's every start with `E2BIG`.
 */
const MAX_ARG_BYTES = 128 * 1024 - 1;

/** The most bytes a `fromFile` value is read to: a secret, a token, a key; not a data file. */
const MAX_FILE_VALUE_BYTES = 1024 * 1024;

/** A string that goes on a server's command line: no NUL (no command line can carry one), within {@link MAX_ARG_BYTES}. */
const CommandLineString = z
  .string()
  .refine((v) => !v.includes('\0'), 'contains a NUL character, which a command line cannot carry; remove it')
  .refine((v) => Buffer.byteLength(v) <= MAX_ARG_BYTES, { error: (issue) => `is ${Buffer.byteLength(String(issue.input))} bytes, over the ${MAX_ARG_BYTES} one argument may be (the kernel's MAX_ARG_STRLEN); pass large data in a file` });

export const ValueSource = z.union([z.string(), z.strictObject({ fromEnv: EnvName }), z.strictObject({ fromFile: z.string().min(1) })], {
  error: 'must be a string, { fromEnv: NAME } or { fromFile: PATH }',
});
export type ValueSource = z.infer<typeof ValueSource>;

/**
 * Settings of one tool that the fleet trusts because the file says so (the
 * server's own annotations are hints; see `trustedSettings`). Unset: see there.
 */
export const ToolOverrides = z.strictObject({
  /** Safe to run again after an instance or worker is lost mid-call. */
  retryable: z.boolean().optional(),
  /** Safe to start before the model has finished its response (no side effects). */
  speculatable: z.boolean().optional(),
  /** A person confirms each call before it runs. */
  requiresConfirmation: z.boolean().optional(),
  /** The call ends (and the server is sent `notifications/cancelled`) after this long. */
  timeoutMs: int().positive().max(MAX_TIMEOUT_MS).optional(),
  /** How long a call waits for a person before it ends unapproved. */
  approvalDeadlineMs: int().positive().max(MAX_TIMEOUT_MS).optional(),
  /**
   * The tier of this one tool, when it differs from its server's: the workers
   * of that tier (and pool) given this file run the server too and serve only
   * the tools placed there, each in its own tier's isolation — so one
   * server's reading tools can run sandboxed while its writing tool runs on
   * a host pool of its own.
   */
  tier: TierInput.optional(),
  /** Host tier only: the host worker pool of this one tool. */
  pool: PoolName.optional(),
});
export type ToolOverrides = z.infer<typeof ToolOverrides>;

const Paths = z.array(z.string().min(1)).default([]);

/**
 * One server as written. Stdio (`command`, `args`, `cwd`, `env`) and Streamable
 * HTTP (`url`, `headers`) share one object, so a stray key gets an error that
 * says which kind it belongs to rather than a union's "no option matched".
 */
export const ServerSpec = z
  .strictObject({
    /** Stdio: the program to start (looked up on the declared `PATH`). */
    command: CommandLineString.pipe(z.string().min(1)).optional(),
    /** Stdio: its arguments. @defaultValue [] */
    args: z.array(CommandLineString).default([]),
    /** Stdio: its working directory, relative to the servers file. @defaultValue the worker's */
    cwd: z.string().min(1).optional(),
    /**
     * Stdio: its whole environment. Nothing is inherited from the worker — not
     * even `PATH` (write `PATH: { fromEnv: PATH }` for `npx`). @defaultValue {}
     */
    env: z.record(EnvName, ValueSource).default({}),
    /** Streamable HTTP: the upstream's endpoint. */
    url: z.url({ protocol: /^https?$/, error: 'must be an http:// or https:// URL' }).optional(),
    /** Streamable HTTP: headers sent with every request (an `Authorization` from a secret, say). @defaultValue {} */
    headers: z.record(HeaderName, ValueSource).default({}),
    /** @defaultValue the server's name */
    prefix: ToolPrefix.optional(),
    /** @defaultValue {@link SERVER_DEFAULTS}.tier */
    tier: TierInput.default(SERVER_DEFAULTS.tier),
    /** Host tier only: the host worker pool that runs it. */
    pool: PoolName.optional(),
    /**
     * Sandboxed tiers only: the private filesystem view, relative to the servers
     * file. `read` paths are mounted read-only; only `write` paths are writable.
     */
    filesystem: z.strictObject({ read: Paths, write: Paths }).optional(),
    /** Processes of this server per worker. @defaultValue {@link SERVER_DEFAULTS}.instances (`max`: {@link SERVER_DEFAULTS}.perCallerMax for a `perCaller` server) */
    instances: z
      .strictObject({ min: int().min(0).max(256).default(SERVER_DEFAULTS.instances.min), max: int().min(1).max(256).optional() })
      .prefault({}),
    /** @defaultValue {@link SERVER_DEFAULTS}.callsPerInstance */
    callsPerInstance: int().min(1).max(1024).default(SERVER_DEFAULTS.callsPerInstance),
    /** From spawn (or first request) to a completed `initialize`. @defaultValue {@link SERVER_DEFAULTS}.startupTimeoutMs */
    startupTimeoutMs: int().positive().max(600_000).default(SERVER_DEFAULTS.startupTimeoutMs),
    /** @defaultValue {@link SERVER_DEFAULTS}.restartBackoff */
    restartBackoff: z
      .strictObject({ initialMs: duration().min(0).default(SERVER_DEFAULTS.restartBackoff.initialMs), maxMs: duration().min(0).default(SERVER_DEFAULTS.restartBackoff.maxMs) })
      .prefault({}),
    /** @defaultValue {@link SERVER_DEFAULTS}.crashLoop */
    crashLoop: z
      .strictObject({ failures: int().min(1).max(1000).default(SERVER_DEFAULTS.crashLoop.failures), windowMs: duration().positive().default(SERVER_DEFAULTS.crashLoop.windowMs) })
      .prefault({}),
    /** `shared`: any instance serves any call. `perCaller`: a caller's calls stay on one instance (browsers, database sessions). @defaultValue "shared" */
    session: z.enum(['shared', 'perCaller']).default(SERVER_DEFAULTS.session),
    /** @defaultValue {@link SERVER_DEFAULTS}.idleMs */
    idleMs: duration().positive().default(SERVER_DEFAULTS.idleMs),
    /** Per-tool settings, keyed by the tool's name as the server lists it (without the prefix). @defaultValue {} */
    tools: z.record(ToolName, ToolOverrides).default({}),
  })
  .superRefine((s, ctx) => {
    const issue = (path: PropertyKey[], message: string): void => ctx.addIssue({ code: 'custom', path, message });
    if (s.command === undefined && s.url === undefined) issue([], 'give `command` (a stdio server) or `url` (a Streamable HTTP server)');
    if (s.command !== undefined && s.url !== undefined) issue(['url'], 'a server is reached by `command` (stdio) or `url` (Streamable HTTP), not both; remove one');
    if (s.command === undefined && s.url !== undefined) {
      if (s.args.length > 0) issue(['args'], '`args` is for stdio servers (`command`); remove it');
      if (s.cwd !== undefined) issue(['cwd'], '`cwd` is for stdio servers (`command`); remove it');
      if (Object.keys(s.env).length > 0) issue(['env'], '`env` is for stdio servers (`command`); remove it (an HTTP upstream takes `headers`)');
    }
    // A URL is logged and shown in /readyz; credentials belong in headers taken from a secret.
    if (s.url !== undefined && /^[a-z]+:\/\/[^/?#]*@/i.test(s.url)) issue(['url'], 'a URL must not carry credentials (user:password@); send them in `headers` with { fromEnv } or { fromFile }');
    if (s.command !== undefined && Object.keys(s.headers).length > 0) issue(['headers'], '`headers` is for Streamable HTTP servers (`url`); remove it (a stdio server takes `env`)');
    if (s.pool !== undefined && s.tier !== 'host') issue(['pool'], `only host-tier servers run on named worker pools; remove pool "${s.pool}" or set tier: host`);
    for (const [tool, o] of Object.entries(s.tools)) {
      const tier = o.tier ?? s.tier;
      if (o.pool !== undefined && tier !== 'host') issue(['tools', tool, 'pool'], `only host-tier tools run on named worker pools; remove pool "${o.pool}" or set tier: host for this tool`);
    }
    // On the host tier nothing would enforce the view; accepting it would promise a confinement that is not there.
    // A host server with a tool placed on a sandboxed tier runs sandboxed instances there, which need their view.
    const sandboxedTool = Object.values(s.tools).some((o) => o.tier !== undefined && o.tier !== 'host');
    if (s.filesystem !== undefined && s.tier === 'host' && !sandboxedTool) issue(['filesystem'], 'host-tier servers get no private filesystem view; remove `filesystem`, choose tier: platform, or place the tools that need it on tier: platform');
    const max = maxInstances(s);
    if (s.instances.min > max) issue(['instances', 'min'], `min (${s.instances.min}) is above max (${max}${s.instances.max === undefined ? ', the default' : ''}); lower min, or raise instances.max`);
    if (s.restartBackoff.initialMs > s.restartBackoff.maxMs) issue(['restartBackoff', 'initialMs'], `initialMs (${s.restartBackoff.initialMs}) is above maxMs (${s.restartBackoff.maxMs}); lower initialMs, or raise maxMs`);
  });
export type ServerSpec = z.infer<typeof ServerSpec>;

/** A server's most instances: as written, else the default for its session mode. */
function maxInstances(s: { readonly instances: { readonly max?: number | undefined }; readonly session: 'shared' | 'perCaller' }): number {
  return s.instances.max ?? (s.session === 'perCaller' ? SERVER_DEFAULTS.perCallerMax : SERVER_DEFAULTS.instances.max);
}

/**
 * The servers file a worker is given with `--mcp` (YAML, or strict JSON when named `*.json`):
 *
 * ```yaml
 * version: 1
 * servers:
 *   files:                                   # the name; also the prefix: files.read_file
 *     command: npx
 *     args: ["-y", "@modelcontextprotocol/server-filesystem", /data]
 *     env: { PATH: { fromEnv: PATH } }       # nothing else is inherited
 *     tier: platform
 *     filesystem: { read: [/data], write: [/data/out] }
 *     instances: { min: 1, max: 4 }
 *     tools: { write_file: { requiresConfirmation: true } }
 *   github:
 *     url: https://api.example.com/mcp
 *     headers: { Authorization: { fromFile: /run/secrets/github } }
 *     prefix: gh
 *     pool: github
 * ```
 */
export const ServersFile = z
  .strictObject({
    version: z.literal(1),
    servers: z.record(ServerName, ServerSpec),
  })
  .superRefine((file, ctx) => {
    const owners = new Map<string, string>();
    for (const [name, server] of Object.entries(file.servers)) {
      const prefix = server.prefix ?? name;
      const other = owners.get(prefix);
      // Two servers with one prefix would offer each other's tool names: refused here, before either starts.
      if (other !== undefined) ctx.addIssue({ code: 'custom', path: server.prefix === undefined ? ['servers', name] : ['servers', name, 'prefix'], message: `prefix "${prefix}" is already the prefix of server "${other}"; give one of them another \`prefix\`` });
      else owners.set(prefix, name);
      for (const tool of Object.keys(server.tools)) {
        const named = prefixedToolName(prefix, tool);
        if (!named.ok) ctx.addIssue({ code: 'custom', path: ['servers', name, 'tools', tool], message: named.reason });
      }
    }
  });
export type ServersFile = z.infer<typeof ServersFile>;

/**
 * The fleet's name for a server's tool, `prefix.tool`, or why there is none.
 * Used for the file's `tools` keys and, at import, for every name a server's
 * `tools/list` gives (a server may list names no MCP client could call).
 */
export function prefixedToolName(prefix: string, tool: string): { ok: true; name: string } | { ok: false; reason: string } {
  const own = ToolName.safeParse(tool);
  if (!own.success) return { ok: false, reason: `tool "${tool}" ${own.error.issues[0]?.message ?? 'is not a valid tool name'}` };
  const name = `${prefix}.${tool}`;
  if (name.length > MAX_TOOL_NAME) return { ok: false, reason: `"${name}" is ${name.length} characters; tool names are at most ${MAX_TOOL_NAME} (shorten the prefix)` };
  return { ok: true, name };
}

/** How a worker reaches a stdio server. */
export interface StdioTransport {
  readonly kind: 'stdio';
  readonly command: string;
  readonly args: readonly string[];
  /** Absolute; `undefined`: the worker's working directory. */
  readonly cwd: string | undefined;
  /** The server's whole environment. */
  readonly env: Readonly<Record<string, ConfigValue>>;
}

/** How a worker reaches a Streamable HTTP server. */
export interface HttpTransport {
  readonly kind: 'http';
  readonly url: string;
  readonly headers: Readonly<Record<string, ConfigValue>>;
}

/** One server, checked, with its defaults applied, paths absolute and values taken from the environment and files. */
export interface McpServerConfig {
  readonly name: string;
  readonly prefix: string;
  readonly transport: StdioTransport | HttpTransport;
  readonly tier: Tier;
  readonly pool: string | undefined;
  /** Absolute paths; `undefined` on the host tier (and when a sandboxed server declares none: it then sees no files of the host). */
  readonly filesystem: { readonly read: readonly string[]; readonly write: readonly string[] } | undefined;
  readonly instances: { readonly min: number; readonly max: number };
  readonly callsPerInstance: number;
  readonly startupTimeoutMs: number;
  readonly restartBackoff: { readonly initialMs: number; readonly maxMs: number };
  readonly crashLoop: { readonly failures: number; readonly windowMs: number };
  readonly session: 'shared' | 'perCaller';
  readonly idleMs: number;
  /** Keyed by the server's own tool names (without the prefix). */
  readonly tools: Readonly<Record<string, ToolOverrides>>;
}

/** The tier and pool a server's tool is served in: its own setting in the file, else its server's. */
export function placeOfTool(server: Pick<McpServerConfig, 'tier' | 'pool' | 'tools'>, tool: string): { readonly tier: Tier; readonly pool: string | undefined } {
  const own = Object.hasOwn(server.tools, tool) ? server.tools[tool] : undefined;
  if (own?.tier === undefined) return { tier: server.tier, pool: own?.pool ?? server.pool };
  return { tier: own.tier, pool: own.tier === 'host' ? own.pool : undefined };
}

/**
 * Whether a worker of `tier` (and `pool`) runs this server: the server's own
 * place, or the place of any tool the file puts elsewhere.
 */
export function runsOn(server: Pick<McpServerConfig, 'tier' | 'pool' | 'tools'>, tier: Tier, pool: string | undefined): boolean {
  const here = (p: { tier: Tier; pool: string | undefined }): boolean => p.tier === tier && (tier !== 'host' || p.pool === pool);
  return here({ tier: server.tier, pool: server.pool }) || Object.keys(server.tools).some((t) => here(placeOfTool(server, t)));
}

/** The servers of a file, in the file's order, and the file they came from. */
export interface LoadedServersFile {
  readonly servers: readonly McpServerConfig[];
  readonly source: string;
}

/**
 * Reads, checks and resolves a servers file once, at start-up: `fromEnv` and
 * `fromFile` values are taken now, so a missing secret stops the worker at
 * start rather than failing a server's first call.
 *
 * @param env the worker's environment (main.ts passes `process.env`; nothing here reads it).
 * @param lane the lane of the worker that loads it: the `fromEnv`/`fromFile` values of the servers it does not run
 *   are not taken (nor is a missing one a reason to stop). Without it (`npm start`, which starts every lane), all are.
 * @throws ConfigInvalidError naming each problem's `file:line:col` and path; a
 *   taken value is named by its variable or file, never shown.
 */
export function loadServersFile(path: string, env: Readonly<Record<string, string | undefined>>, lane?: { readonly tier: Tier; readonly pool: string | undefined }): LoadedServersFile {
  const file = resolve(path);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new ConfigInvalidError(WHAT, [`--mcp: cannot read ${file}: ${errorCode(error)}; give --mcp the path of a servers file the worker can read`], { cause: error });
  }
  const source = parseConfigSource(file, text, WHAT);
  // An empty document (or only comments) parses to null: say what the file needs rather than "expected object".
  if (source.value === null || source.value === undefined) {
    throw new ConfigInvalidError(WHAT, [`${file}: the file is empty; it needs \`version: 1\` and a \`servers\` map (see docs/mcp-servers.md)`]);
  }
  const parsed = ServersFile.safeParse(source.value);
  if (!parsed.success) {
    throw new ConfigInvalidError(WHAT, schemaProblems(ServersFile, parsed.error.issues, source), { cause: parsed.error });
  }
  const problems: string[] = [];
  const servers = Object.entries(parsed.data.servers).map(([name, spec]) => resolveServer(name, spec, { dir: dirname(file), env, source, problems, lane }));
  if (problems.length > 0) throw new ConfigInvalidError(WHAT, problems);
  return Object.freeze({ servers: Object.freeze(servers), source: file });
}

interface Resolution {
  readonly dir: string;
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly source: YamlSource;
  readonly problems: string[];
  /** The worker's lane, when one loads the file: the values of a server it does not run are not taken (see loadServersFile). */
  readonly lane: { readonly tier: Tier; readonly pool: string | undefined } | undefined;
}

/** What to do about a path of the file that does not exist: create it, or see where a relative path starts. */
const FIX_PATH = 'create it, or fix the path (a relative path starts at the servers file\'s directory)';

function resolveServer(name: string, spec: ServerSpec, r: Resolution): McpServerConfig {
  const at = ['servers', name];
  const directory = (p: string, path: PropertyKey[]): string => {
    const absolute = resolve(r.dir, p);
    const kind = statKind(absolute);
    if (kind !== 'directory') r.problems.push(problemAt(r.source, [...at, ...path], kind === 'missing' ? `${absolute} does not exist; ${FIX_PATH}` : `${absolute} is not a directory; give a directory`));
    return absolute;
  };
  const existing = (p: string, path: PropertyKey[]): string => {
    const absolute = resolve(r.dir, p);
    // A sandbox cannot mount what is not there; saying so now beats a server that fails to start.
    if (statKind(absolute) === 'missing') r.problems.push(problemAt(r.source, [...at, ...path], `${absolute} does not exist; ${FIX_PATH}`));
    else {
      // A path that leads elsewhere is one a symlink can lead anywhere, at the next launch: whoever may write where
      // the symlink is (another sandboxed server) could point it at the fleet's keys. Each launch binds a declared
      // path only where it leads to itself (pinned-paths.ts); a worker reading the file after a swap must refuse too.
      const real = realPath(absolute);
      if (real !== undefined && real !== absolute) r.problems.push(problemAt(r.source, [...at, ...path], `${absolute} leads to ${real} through a symlink; declare ${real} itself (a declared path must lead to itself, so that nothing can repoint it)`));
    }
    return absolute;
  };
  // A server this worker does not run needs none of its values here: a secret of a Platform server is not the host
  // worker's to have, nor is its absence the host worker's reason to stop. Empty stand-ins keep the shape.
  const runsHere = r.lane === undefined || runsOn({ tier: spec.tier, pool: spec.pool, tools: spec.tools }, r.lane.tier, r.lane.pool);
  const values = (record: Readonly<Record<string, ValueSource>>, field: 'env' | 'headers'): Record<string, ConfigValue> =>
    Object.fromEntries(Object.entries(record).map(([key, value]) => [key, runsHere ? takeValue(value, { ...r, path: [...at, field, key], field }) : '']));

  const transport: StdioTransport | HttpTransport =
    spec.command !== undefined
      ? Object.freeze({ kind: 'stdio', command: spec.command, args: Object.freeze([...spec.args]), cwd: spec.cwd === undefined ? undefined : directory(spec.cwd, ['cwd']), env: Object.freeze(values(spec.env, 'env')) })
      : Object.freeze({ kind: 'http', url: spec.url ?? '', headers: Object.freeze(values(spec.headers, 'headers')) });
  const fs = spec.filesystem;
  return Object.freeze({
    name,
    prefix: spec.prefix ?? name,
    transport,
    tier: spec.tier,
    pool: spec.pool,
    filesystem:
      fs === undefined
        ? undefined
        : Object.freeze({
            read: Object.freeze(fs.read.map((p, i) => existing(p, ['filesystem', 'read', i]))),
            write: Object.freeze(fs.write.map((p, i) => existing(p, ['filesystem', 'write', i]))),
          }),
    instances: Object.freeze({ min: spec.instances.min, max: maxInstances(spec) }),
    callsPerInstance: spec.callsPerInstance,
    startupTimeoutMs: spec.startupTimeoutMs,
    restartBackoff: Object.freeze({ ...spec.restartBackoff }),
    crashLoop: Object.freeze({ ...spec.crashLoop }),
    session: spec.session,
    idleMs: spec.idleMs,
    tools: Object.freeze(Object.fromEntries(Object.entries(spec.tools).map(([tool, o]) => [tool, Object.freeze({ ...o })]))),
  });
}

/** Takes one `env`/`headers` value; on a problem, records it (naming the source, never the value) and returns a placeholder. */
function takeValue(value: ValueSource, r: Resolution & { readonly path: PropertyKey[]; readonly field: 'env' | 'headers' }): ConfigValue {
  let taken: ConfigValue;
  if (typeof value === 'string') {
    taken = value;
  } else if ('fromEnv' in value) {
    const v = r.env[value.fromEnv];
    if (v === undefined) {
      r.problems.push(problemAt(r.source, r.path, `environment variable ${value.fromEnv} is not set in the worker's environment; set it where the worker starts, or take the value from elsewhere`));
      return '';
    }
    taken = new SecretValue(v, `environment variable ${value.fromEnv}`);
  } else {
    const file = resolve(r.dir, value.fromFile);
    const read = readValueFile(file);
    if (typeof read !== 'string') {
      r.problems.push(problemAt(r.source, r.path, read.problem));
      return '';
    }
    const text = read;
    // Secret files are written by `echo` and editors as often as not: one trailing newline is never part of a token.
    taken = new SecretValue(text.replace(/\r?\n$/, ''), `file ${file}`);
  }
  const plain = typeof taken === 'string' ? taken : taken.reveal();
  const what = typeof taken === 'string' ? 'the value' : `the value from ${taken.source}`;
  // A header with a line break would be refused by fetch at the first request (or smuggle a header); a NUL cannot be in any environment.
  if (r.field === 'headers' && /[\r\n\0]/.test(plain)) r.problems.push(problemAt(r.source, r.path, `${what} contains a line break or NUL, which a header cannot carry; remove it there`));
  if (r.field === 'env' && plain.includes('\0')) r.problems.push(problemAt(r.source, r.path, `${what} contains a NUL character, which an environment cannot carry; remove it there`));
  const entry = r.field === 'env' ? Buffer.byteLength(`${String(r.path.at(-1))}=${plain}`) : 0;
  if (entry > MAX_ARG_BYTES) r.problems.push(problemAt(r.source, r.path, `${what} makes an environment entry of ${entry} bytes, over the ${MAX_ARG_BYTES} one may be (the kernel's MAX_ARG_STRLEN); pass large data in a file the server reads`));
  return taken;
}

/**
 * The text of a `fromFile` value, or what is wrong with its file: one that is
 * no regular file (a FIFO would block the worker's start for ever, a device
 * never end) or is larger than {@link MAX_FILE_VALUE_BYTES}. Opened without
 * blocking and checked on the descriptor, so the file checked is the file read.
 */
function readValueFile(file: string): string | { problem: string } {
  const fix = "fix `fromFile` (a relative path starts at the servers file's directory) or the file's permissions";
  let fd: number;
  try {
    fd = openSync(file, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (error) {
    // The code alone (ENOENT, EACCES…): a message is safe today, but a path is all anyone needs.
    return { problem: `cannot read file ${file}: ${errorCode(error)}; ${fix}` };
  }
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile()) return { problem: `${file} is not a regular file (a directory, a FIFO or a device); give \`fromFile\` a file that holds the value` };
    if (stat.size > MAX_FILE_VALUE_BYTES) return { problem: `${file} is ${stat.size} bytes; a value from a file may be at most ${MAX_FILE_VALUE_BYTES} (a secret, a token or a key)` };
    return readFileSync(fd, 'utf8');
  } catch (error) {
    return { problem: `cannot read file ${file}: ${errorCode(error)}; ${fix}` };
  } finally {
    closeSync(fd);
  }
}

/** Where `path` leads on the host, every symlink followed; undefined when it cannot be told (a permission, a race). */
function realPath(path: string): string | undefined {
  try {
    return realpathSync(path);
  } catch {
    return undefined;
  }
}

function statKind(path: string): 'directory' | 'other' | 'missing' {
  try {
    return statSync(path).isDirectory() ? 'directory' : 'other';
  } catch {
    return 'missing';
  }
}

function errorCode(error: unknown): string {
  const code = typeof error === 'object' && error !== null ? (error as { code?: unknown }).code : undefined;
  return typeof code === 'string' ? code : error instanceof Error ? error.message : String(error);
}
