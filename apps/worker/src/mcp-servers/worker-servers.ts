import { EventEmitter } from 'node:events';
import { setTimeout as delay } from 'node:timers/promises';
import { ErrorCode, isFleetError, type Tier, type Tool } from '@forge-fleet/shared';
import type { Logger } from 'pino';
import type { LaunchTools } from './launch-command.js';
import { poolOptionsOf } from './pool-options-of.js';
import { type McpServerConfig, runsOn } from './servers-file.js';
import { McpServerPool } from './server-pool.js';
import { McpToolExecutor } from './mcp-tool-executor.js';
import { importTools, type SkippedTool } from './tool-import.js';
import type { ServerListing } from './upstream-instance.js';

/**
 * `starting`: its first instance is on its way; `up`: its tools are served;
 * `down`: it could not be started (the pool keeps trying, with backoff) or
 * listed no tools this worker serves; `stopped`: it crash-looped, and its
 * tools are withdrawn until a fresh pool tries it again a minute later.
 */
export type ServerState = 'starting' | 'up' | 'down' | 'stopped';

/** One server as `/readyz` and the logs show it. */
export interface ServerStatus {
  readonly name: string;
  readonly state: ServerState;
  /** Its tools this worker serves now. */
  readonly tools: number;
  readonly instances: number;
  /** What went wrong last (a start failure, a crash loop, a failed listing). */
  readonly error?: string;
  /** Tools of its list the fleet does not serve, and why. */
  readonly skipped?: readonly SkippedTool[];
}

/**
 * How long a server that crash-looped rests before a fresh pool tries it
 * again: a crash loop is often a dependency that is down (an upstream being
 * deployed, a database restarting), which a worker should not need a restart
 * to see come back; once a minute costs a crash-looping server little.
 */
export const REVIVE_AFTER_MS = 60_000;

/**
 * A server's next listing waits this many times as long as its last import
 * took (at most {@link IMPORT_REST_MAX_MS}): a list that changes without rest
 * and takes long to compile then costs the worker at most a fifth of its time,
 * while a small list (a few milliseconds) is followed as closely as before.
 */
export const IMPORT_REST_FACTOR = 4;
/** The longest a server's next listing waits after a slow import (see {@link IMPORT_REST_FACTOR}). */
export const IMPORT_REST_MAX_MS = 60_000;

/**
 * How long a worker's start waits for its servers' first start before it
 * serves the tools of those that are up: most servers start well within it,
 * so the first announcement usually holds them all, and a server that hangs
 * (no answer to `initialize` until its `startupTimeoutMs`) holds up the
 * others' tools for this long, not for its whole timeout. A server still
 * starting then joins the catalog when it comes up (or is `down`, saying why).
 */
export const STARTUP_HEAD_START_MS = 3000;

interface Served {
  readonly config: McpServerConfig;
  pool: McpServerPool;
  reviveTimer: NodeJS.Timeout | undefined;
  state: ServerState;
  tools: readonly Tool[];
  skipped: readonly SkippedTool[];
  error: string | undefined;
  /** A listing under way: a second change waits for it, then lists once more. */
  importing: Promise<void> | undefined;
  again: boolean;
  /** Its first start is over: it came up, or is known down or stopped (a later `starting`, after a crash loop, is not a first start). */
  settled: boolean;
}

/** How a worker runs its MCP servers. */
export interface WorkerServersOptions {
  readonly servers: readonly McpServerConfig[];
  readonly tier: Tier;
  readonly pool: string | undefined;
  readonly launchTools: LaunchTools;
  /** Platform/Embedded tiers: confine each server process (see server-sandbox.ts); false only with FORGE_SANDBOX=off. */
  readonly sandbox: boolean;
  /** How long a crash-looped server rests before a fresh pool tries it (FORGE_MCP_RETRY_AFTER_MS). @defaultValue {@link REVIVE_AFTER_MS} */
  readonly reviveAfterMs?: number | undefined;
  /** The bound on one message of a server (see messageBoundFor). @defaultValue MAX_MESSAGE_BYTES */
  readonly maxMessageBytes?: number;
  /** How long start waits for every server's first start before the worker goes on without the slow ones. @defaultValue {@link STARTUP_HEAD_START_MS} */
  readonly startupWaitMs?: number;
  readonly log: Logger;
}

/** The events of a {@link WorkerServers}. */
export interface WorkerServersEvents {
  /** The tools the servers give this worker changed (a server came up, went away, or changed its list). */
  toolsChanged: [];
}

/**
 * The MCP servers one worker runs: a warm pool per server the file places in
 * this worker's lane, and the fleet tools their `tools/list` give. The
 * catalog follows each server: a server's `notifications/tools/list_changed`,
 * its first instance coming up late, any instance coming up after its tools
 * were listed (a replacement, a scale-up, a caller's session: it lists what
 * the server lists now), or its pool giving up after a crash loop re-imports
 * its tools, and tells {@link WorkerServersEvents.toolsChanged} when they differ.
 * A server that cannot start leaves its tools out; the others serve on.
 */
export class WorkerServers extends EventEmitter<WorkerServersEvents> {
  readonly #o: WorkerServersOptions;
  readonly #served: Served[] = [];
  #closed = false;
  #onSettled: (() => void) | undefined;
  readonly #settledAll = new Promise<void>((resolve) => (this.#onSettled = resolve));

  constructor(options: WorkerServersOptions) {
    super();
    this.#o = options;
    for (const config of options.servers) {
      if (!runsOn(config, options.tier, options.pool)) continue;
      const served: Served = { config, pool: this.#newPool(config), reviveTimer: undefined, state: 'starting', tools: [], skipped: [], error: undefined, importing: undefined, again: false, settled: false };
      this.#served.push(served);
      this.#watch(served);
    }
  }

  /** The servers this worker runs (the file's servers placed in its lane). */
  get names(): readonly string[] {
    return this.#served.map((s) => s.config.name);
  }

  /**
   * Starts every server's `min` instances and imports their tools, waiting
   * until each server's first start is over or at most `startupWaitMs`; a
   * server still starting then is left to come up on its own (its tools join
   * when it does: {@link WorkerServersEvents.toolsChanged}). A stop asked for
   * meanwhile (`stopRequested`) ends the wait at once.
   */
  async start(stopRequested?: AbortSignal): Promise<void> {
    const wait = this.#o.startupWaitMs ?? STARTUP_HEAD_START_MS;
    for (const served of this.#served) {
      served.pool.start().then(
        () => this.#import(served),
        // Told already: the pool's startFailed (see #watch), which settles it.
        () => undefined,
      );
    }
    this.#checkSettled();
    let timer: NodeJS.Timeout | undefined;
    let onStop: (() => void) | undefined;
    const stopped = new Promise<void>((resolve) => {
      onStop = () => resolve();
      if (stopRequested?.aborted === true) resolve();
      else stopRequested?.addEventListener('abort', onStop, { once: true });
    });
    await Promise.race([this.#settledAll, new Promise<void>((resolve) => (timer = setTimeout(resolve, wait))), stopped]);
    clearTimeout(timer);
    if (onStop !== undefined) stopRequested?.removeEventListener('abort', onStop);
  }

  /** Whether every server's first start is over: each came up, or is known down or stopped. */
  get settled(): boolean {
    return this.#served.every((s) => s.settled);
  }

  /** Resolves once every server's first start is over (see {@link settled}); never, for a worker closed before. */
  whenSettled(): Promise<void> {
    return this.#settledAll;
  }

  /** Every tool the servers give this worker now. */
  tools(): Tool[] {
    return this.#served.flatMap((s) => s.tools);
  }

  status(): ServerStatus[] {
    return this.#served.map((s) => ({
      name: s.config.name,
      state: s.state,
      tools: s.tools.length,
      instances: s.pool.status().instances.length,
      ...(s.error === undefined ? {} : { error: s.error }),
      ...(s.skipped.length === 0 ? {} : { skipped: s.skipped }),
    }));
  }

  /**
   * How many calls this worker's servers can run at once: each server's
   * `instances.max` × `callsPerInstance`, summed. A worker that serves only
   * servers takes no more calls than this by default (see main.ts), so that
   * calls beyond it wait in the queue, where any worker can take them, not
   * inside this worker for an instance, counted as started there.
   */
  callSlots(): number {
    return this.#served.reduce((sum, s) => sum + s.config.instances.max * s.config.callsPerInstance, 0);
  }

  /** Closes every pool: each kills the processes it started (or ends its HTTP sessions). */
  async close(): Promise<void> {
    this.#closed = true;
    for (const s of this.#served) clearTimeout(s.reviveTimer);
    await Promise.all(this.#served.map((s) => s.pool.close().catch(() => undefined)));
  }

  #newPool(config: McpServerConfig): McpServerPool {
    return new McpServerPool(poolOptionsOf(config, { sandbox: this.#o.sandbox && this.#o.tier !== 'host', ...(this.#o.maxMessageBytes === undefined ? {} : { maxMessageBytes: this.#o.maxMessageBytes }) }), this.#o.launchTools);
  }

  /** A fresh pool for a server that crash-looped, after a rest; its tools come back when it lists them. */
  #revive(served: Served): void {
    served.reviveTimer = setTimeout(() => {
      served.reviveTimer = undefined;
      if (this.#closed) return;
      this.#o.log.info({ server: served.config.name }, 'MCP server: trying again after its crash loop');
      void served.pool.close().catch(() => undefined);
      served.pool = this.#newPool(served.config);
      served.state = 'starting';
      this.#watch(served);
      // A failure is told by the pool's startFailed (see #watch).
      served.pool.start().then(
        () => this.#import(served),
        () => undefined,
      );
    }, this.#o.reviveAfterMs ?? REVIVE_AFTER_MS);
    served.reviveTimer.unref();
  }

  #watch(served: Served): void {
    const { pool, config } = served;
    const log = this.#o.log;
    pool.on('instanceStarted', ({ instance }) => {
      log.info({ server: config.name, instance }, 'MCP server instance started');
      // A server that was down (or slow at start) is up now: its tools join.
      if (served.state !== 'up') void this.#import(served);
    });
    // What a server writes to stderr is for its operator: logged here, never shown to callers.
    pool.on('stderr', ({ pid, line }) => log.info({ server: config.name, instance: pid === undefined ? undefined : `pid ${pid}`, stderr: line }, 'MCP server stderr'));
    pool.on('unreadable', ({ pid, text }) => log.warn({ server: config.name, instance: pid === undefined ? undefined : `pid ${pid}`, err: text }, 'MCP server stdio error: what it wrote could not be taken, and was dropped'));
    pool.on('instanceExited', (exit) => {
      if (exit.failed) log.warn({ server: config.name, instance: exit.instance, why: exit.why, detail: exit.detail }, 'MCP server instance died');
    });
    pool.on('startFailed', ({ error }) => this.#failed(served, error));
    pool.on('stopped', ({ error }) => {
      const text = failureText(config, error);
      log.error({ server: config.name, err: text, retryInMs: this.#o.reviveAfterMs ?? REVIVE_AFTER_MS }, 'MCP server crash-looped; its tools are withdrawn until it is tried again');
      served.state = 'stopped';
      served.error = text;
      this.#setTools(served, []);
      this.#settle(served);
      this.#revive(served);
    });
    // notifications/tools/list_changed from any instance, or an instance that came up after the tools were listed
    // (it may list otherwise: the one it replaced may have changed its list at run time); a burst told once. A list
    // that turns out the same changes nothing (#setTools), so a pool scaling up costs a listing, not a generation.
    pool.on('toolsChanged', () => void this.#import(served));
  }

  #failed(served: Served, err: unknown): void {
    const message = failureText(served.config, err);
    // The same failure again (a listing retried as instances come up, a restart that fails the same way) is logged once.
    const repeated = served.error === message;
    served.error = message;
    if (served.state === 'starting') served.state = 'down';
    if (repeated) {
      this.#settle(served);
      return;
    }
    // A listing again that fails (after a list change, a new instance) leaves the tools it listed last served.
    if (served.state === 'up') this.#o.log.warn({ server: served.config.name, err: message }, 'MCP server could not be listed again; the tools it listed last are served');
    else this.#o.log.warn({ server: served.config.name, err: message }, 'MCP server could not be started; its tools are left out until it can');
    this.#settle(served);
  }

  /** Marks a server's first start over; once every server's is, {@link whenSettled} resolves. */
  #settle(served: Served): void {
    if (served.settled) return;
    served.settled = true;
    this.#checkSettled();
  }

  #checkSettled(): void {
    if (this.settled) this.#onSettled?.();
  }

  /** Lists the server's tools and serves what the list gives; one listing at a time, the last change always listed. */
  async #import(served: Served): Promise<void> {
    if (served.importing !== undefined) {
      served.again = true;
      return served.importing;
    }
    served.importing = (async () => {
      let rest = 0;
      do {
        // Unreferenced: a worker shutting down does not wait out the rest (it ends the loop below).
        if (rest >= 1) await delay(rest, undefined, { ref: false });
        served.again = false;
        if (this.#closed || served.state === 'stopped') return;
        try {
          const listed = await served.pool.listTools();
          const began = performance.now();
          const imported = await importTools(served.config, listed, { tier: this.#o.tier, pool: this.#o.pool }, served.pool, this.#o.log);
          rest = Math.min(IMPORT_REST_MAX_MS, IMPORT_REST_FACTOR * (performance.now() - began));
          for (const skip of imported.skipped) this.#o.log.warn({ server: served.config.name, tool: skip.tool, reason: skip.reason }, 'MCP tool not served');
          served.skipped = imported.skipped;
          // A server that gives this worker nothing to serve is down, saying why; its instance runs on, and a list
          // it changes later (list_changed, a new instance) is read again.
          const nothing = imported.tools.length === 0 ? nothingServed(listed, imported.skipped, this.#o) : undefined;
          if (nothing !== undefined && served.error !== nothing) this.#o.log.warn({ server: served.config.name, err: nothing }, 'MCP server serves no tools here');
          served.state = nothing === undefined ? 'up' : 'down';
          served.error = nothing;
          this.#setTools(served, imported.tools);
          this.#settle(served);
        } catch (err) {
          this.#failed(served, err);
        }
      } while (served.again);
    })().finally(() => (served.importing = undefined));
    return served.importing;
  }

  #setTools(served: Served, tools: readonly Tool[]): void {
    const before = listingOf(served.tools);
    served.tools = tools;
    if (listingOf(tools) !== before && !this.#closed) this.emit('toolsChanged');
  }
}

/**
 * A server's failure as `/readyz` and the worker's log say it, to an operator. An UNAVAILABLE's message ends with
 * advice for a caller ("send the request again in a moment") that means nothing there: it is said as the server
 * and its reason. Any other failure, as its message.
 */
function failureText(config: McpServerConfig, err: unknown): string {
  // One line: a server's own text (an error's message, its stderr) may run over several.
  return oneFailureText(config, err).replace(/\s*[\r\n]+\s*/g, ' ');
}

function oneFailureText(config: McpServerConfig, err: unknown): string {
  // A listing that failed says so in its reason ("MCP server 'x' cannot be listed: …"), not as a tool named 'tools/list'.
  if (isFleetError(err) && err.details.toolName === 'tools/list' && typeof err.details.reason === 'string') return err.details.reason;
  if (!isFleetError(err) || err.code !== ErrorCode.UNAVAILABLE || typeof err.details.reason !== 'string') return err instanceof Error ? err.message : String(err);
  return `MCP server '${config.name}' (${whereOf(config.transport)}): ${err.details.reason}`;
}

/** A server for its operator: its command, or its URL as its sessions name it (origin and path: no query). */
function whereOf(transport: McpServerConfig['transport']): string {
  if (transport.kind === 'stdio') return transport.command;
  const url = new URL(transport.url);
  return `${url.origin}${url.pathname}`;
}

/** Why a server's listing gives a worker of `lane` no tool to serve. */
function nothingServed(listing: ServerListing, skipped: readonly SkippedTool[], lane: { readonly tier: Tier; readonly pool: string | undefined }): string {
  const listed = listing.tools.length + listing.refused.length;
  if (listed === 0) return 'it lists no tools';
  const first = skipped[0];
  if (first !== undefined) return `none of the ${listed} tools it lists can be served; ${first.tool}: ${first.reason}${skipped.length > 1 ? ` (and ${skipped.length - 1} more, in the log)` : ''}`;
  return `none of the ${listed} tools it lists is placed on this worker's lane (tier ${lane.tier}${lane.pool === undefined ? '' : `, pool ${lane.pool}`}): see the tier and pool of its tools in the servers file`;
}

/**
 * What a listing decides of the tools served: their definitions and, for each, whether it is called as a task. A tool
 * that comes to require tasks (or stops) changes no definition, yet calls made the old way would fail.
 */
function listingOf(tools: readonly Tool[]): string {
  return tools.map((t) => JSON.stringify(t.definition) + (t.executor instanceof McpToolExecutor && t.executor.asTask ? ' as a task' : '')).join('\n');
}
