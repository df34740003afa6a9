import { EventEmitter } from 'node:events';
import { BadRequestError, ConfigInvalidError, CancelledError, ExecutionTimeoutError, isFleetError, UnavailableError } from '@forge-fleet/shared';
import type { CallToolResult, Progress } from '@modelcontextprotocol/sdk/types.js';
import type { z } from 'zod';
import { HttpMcpInstance } from './http-instance.js';
import { McpInstance } from './instance.js';
import type { LaunchTools } from './launch-command.js';
import { isHttpLaunch, type McpServerPoolOptions, resolveMcpServerPoolOptions } from './pool-options.js';
import { isCrashLoop, restartDelayMs } from './restart-policy.js';
import type { McpInstanceExit, ServerListing, UpstreamInstance } from './upstream-instance.js';

/**
 * `notifications/tools/list_changed` (and instances coming up) within this
 * many milliseconds make one `toolsChanged`: a server that adds tools one by
 * one, every instance announcing the same change, or several instances
 * started at once for demand re-import the catalog once.
 */
const TOOLS_CHANGED_COALESCE_MS = 100;

/** One call through the pool. */
export interface McpPoolCall {
  readonly tool: string;
  readonly arguments: Record<string, unknown>;
  /** Whose session the call belongs to; required in `perCaller` mode, ignored in `shared` mode. */
  readonly caller?: string;
  /** Aborting it ends the wait for a slot, or sends `notifications/cancelled` once the call runs. */
  readonly signal?: AbortSignal;
  /** Receives the server's `notifications/progress` for the call. */
  readonly onProgress?: (progress: Progress) => void;
  /** Overrides {@link McpServerPoolOptions.callTimeoutMs} for this call. */
  readonly timeoutMs?: number;
  /** Call the tool as a task (it lists `execution.taskSupport: "required"`). */
  readonly asTask?: boolean;
  /** The tool as the fleet's caller knows it (`prefix.tool`), for the errors' messages. */
  readonly label?: string;
}

/** The events of an {@link McpServerPool}. */
export interface McpServerPoolEvents {
  /** An instance (a process, or a session with an HTTP upstream) answered `initialize` and takes calls. */
  instanceStarted: [{ readonly instance: string; readonly pid: number | undefined }];
  /** A line of a stdio instance's stderr, for the worker's log (bounded and redacted: see stderr-lines.ts). */
  stderr: [{ readonly pid: number | undefined; readonly line: string }];
  /** What a stdio instance wrote on its stdout that is no JSON-RPC message, dropped (bounded and redacted: see instance.ts). */
  unreadable: [{ readonly pid: number | undefined; readonly text: string }];
  /**
   * An instance is gone; `failed` when it died on its own or stopped answering (then it counts towards a crash loop);
   * `why`, how it ended, for people (`died`, `stopped answering …`, the worker's reason for ending it).
   */
  instanceExited: [McpInstanceExit & { readonly failed: boolean; readonly why: string }];
  /** An instance could not be started. */
  startFailed: [{ readonly error: Error }];
  /** Too many failures in a row: the pool stopped for good and every call now fails with UNAVAILABLE. */
  stopped: [{ readonly error: Error }];
  /**
   * The server's tool list may have changed: list the tools again. Told when an instance receives
   * `notifications/tools/list_changed`, and when an instance comes up after the pool's tools were first listed
   * (one replacing an instance that died or stopped answering, one more for demand, a `perCaller` session): a
   * new instance lists what its server lists now, which the instance it replaced may have changed at run time
   * and never announced undone, and a server's script may have changed since. A burst, from one instance or
   * several, makes one event.
   */
  toolsChanged: [];
}

/** `running` serves calls; `stopped` gave up after a crash loop; `closed` was closed. */
export type McpServerPoolState = 'running' | 'stopped' | 'closed';

/** What the pool is doing now, for health checks and tests. */
export interface McpServerPoolStatus {
  readonly state: McpServerPoolState;
  readonly instances: readonly {
    /** The instance for people: `pid 1234`, or `session 6f1c… at https://host/mcp`. */
    readonly id: string;
    /** The process of a stdio instance; `undefined` for an HTTP session. */
    readonly pid: number | undefined;
    readonly inFlight: number;
    readonly caller: string | undefined;
  }[];
  readonly starting: number;
  readonly waiting: number;
  /** Why the pool stopped, or the latest failure to start an instance. */
  readonly lastError: Error | undefined;
}

interface Entry {
  readonly instance: UpstreamInstance;
  readonly startedAt: number;
  /** Slots taken: calls (and slots reserved for them) and listings. */
  inFlight: number;
  /** Of {@link inFlight}, the listings: reading an instance's tools is no use of it, and keeps no idle instance alive. */
  listings: number;
  /** When its last call ended (or it came up): it is idle from then, and reaped `idleMs` later unless a call comes. */
  idleSince: number;
  /** In `perCaller` mode, the caller this instance belongs to. */
  caller: string | undefined;
  /** Being closed: it takes no more calls. */
  retiring: boolean;
  /** Killed because it stopped answering: its exit counts as a failure. */
  unresponsive: boolean;
  /** Its caller's session was given up here (another worker holds it): stopped as soon as no call holds it. */
  given?: boolean;
  idleTimer: NodeJS.Timeout | undefined;
}

/** A call (or a tools listing) waiting for a slot. `anyInstance`: any instance will do, without claiming a session. */
interface Waiter {
  readonly caller: string | undefined;
  readonly anyInstance: boolean;
  readonly resolve: (entry: Entry) => void;
  readonly reject: (err: Error) => void;
}

/**
 * A warm pool of one MCP server's instances on one worker — stdio processes,
 * or sessions with a Streamable HTTP upstream: `min` to `max` instances,
 * `callsPerInstance` calls each, further calls waiting in order for a slot. An instance that dies is replaced after an exponential
 * backoff, and a crash loop stops the pool; an instance that does not answer
 * a ping after a call timed out is replaced. In `perCaller` mode each caller
 * has an instance of its own until it has been idle for `idleMs`. A tool
 * list change announced by any instance, or an instance coming up once the
 * tools were listed, becomes one `toolsChanged` event.
 * {@link close} kills every process it started and ends every session.
 */
export class McpServerPool extends EventEmitter<McpServerPoolEvents> {
  /** The resolved options (defaults filled in). */
  readonly options: Readonly<McpServerPoolOptions>;
  readonly #launchTools: LaunchTools;
  readonly #entries = new Set<Entry>();
  readonly #sessions = new Map<string, Entry>();
  readonly #starting = new Set<Promise<Error | undefined>>();
  /** Aborted by close: starts still waiting for `initialize` give up (a shutdown does not wait out a hung server's start-up timeout). */
  readonly #closing = new AbortController();
  #waiters: Waiter[] = [];
  #failureTimes: number[] = [];
  #failuresInARow = 0;
  #nextStartAt = 0;
  #restartTimer: NodeJS.Timeout | undefined;
  #state: McpServerPoolState = 'running';
  #lastError: Error | undefined;
  #toolsChangedTimer: NodeJS.Timeout | undefined;
  /**
   * A listing was given an instance: one that comes up from now on may list otherwise, and is told as a change.
   * Set when the listing gets its slot, not when it is asked for: the instance a first listing starts (a pool of
   * `min: 0`) is the one it reads, and listing it again would be a second listing for nothing.
   */
  #listed = false;

  /**
   * @param launchTools the wrappers every server process is started with (see findLaunchTools).
   * @throws ConfigInvalidError when the options are invalid.
   */
  constructor(options: z.input<typeof McpServerPoolOptions>, launchTools: LaunchTools) {
    super();
    this.options = resolveMcpServerPoolOptions(options);
    this.#launchTools = launchTools;
  }

  /**
   * Starts the `min` instances and waits for them.
   *
   * @throws UnavailableError when one of them fails to start (the pool keeps trying, with backoff, until closed or crash-looped).
   */
  async start(): Promise<void> {
    const launches: Promise<Error | undefined>[] = [];
    const { min } = this.options.instances;
    for (let i = this.#liveCount(); i < min; i += 1) launches.push(this.#launch());
    const errors = (await Promise.all(launches)).filter((e) => e !== undefined);
    if (errors[0] !== undefined) throw errors[0];
  }

  /**
   * Every tool the server lists, from any instance (one is started if none runs).
   *
   * @throws UnavailableError when the pool is stopped or closed, or no instance can be started.
   */
  async listTools(): Promise<ServerListing> {
    const entry = await this.#acquire(undefined, true, undefined, 'tools/list');
    try {
      return await entry.instance.listTools({ timeoutMs: this.options.callTimeoutMs });
    } finally {
      this.#release(entry, 'listing');
    }
  }

  /**
   * Runs one call on an instance with a free slot (in `perCaller` mode, the caller's own instance).
   *
   * @throws CancelledError when `call.signal` aborts, waiting or running.
   * @throws ExecutionTimeoutError past the call's timeout; the instance is replaced if it then does not answer a ping.
   * @throws McpServerLostError when the instance dies during the call.
   * @throws UnavailableError when the pool is stopped or closed.
   * @throws BadRequestError when a `perCaller` call has no caller.
   */
  async call(call: McpPoolCall, slot?: McpPoolSlot): Promise<CallToolResult> {
    if (this.options.session === 'perCaller' && call.caller === undefined) {
      throw new BadRequestError(`MCP server '${this.options.server}' keeps a session per caller, and this call names no caller`, { server: this.options.server });
    }
    const entry = this.#takeReserved(slot) ?? (await this.#acquire(this.options.session === 'perCaller' ? call.caller : undefined, false, call.signal, call.label ?? call.tool));
    try {
      return await entry.instance.callTool(call.tool, call.arguments, {
        timeoutMs: call.timeoutMs ?? this.options.callTimeoutMs,
        ...(call.signal === undefined ? {} : { signal: call.signal }),
        ...(call.onProgress === undefined ? {} : { onProgress: call.onProgress }),
        ...(call.asTask === true ? { asTask: true } : {}),
        ...(call.label === undefined ? {} : { label: call.label }),
      });
    } catch (err) {
      // A call that timed out, or was cancelled (the fleet's own tool timeout, the file's timeoutMs, cancels it), may
      // have ended because the server stopped answering: one that does not answer a ping now is replaced.
      if (err instanceof ExecutionTimeoutError || err instanceof CancelledError) void this.#checkResponsive(entry);
      throw err;
    } finally {
      this.#release(entry);
    }
  }

  /**
   * Waits for a slot for a call that has not started yet, and holds it until the call runs on it
   * ({@link call} with the slot) or it is given back (`release`). In `perCaller` mode the slot is on `caller`'s
   * own instance. `onCancellable` is handed the way to stop the wait; the promise then rejects with
   * CancelledError. See tools/slot-reserve.ts for why a call waits before its start step.
   *
   * @throws UnavailableError when the pool is stopped or closed.
   */
  async reserve(caller: string | undefined, what: string, onCancellable?: (cancel: (reason: unknown) => void) => void): Promise<McpPoolSlot> {
    const entry = await this.#acquire(this.options.session === 'perCaller' ? caller : undefined, false, undefined, what, onCancellable);
    return new ReservedSlot(this, entry, () => this.#release(entry));
  }

  /**
   * Whether `caller` has an instance of its own here now, or a call waiting for its first one (`perCaller` mode;
   * never in `shared` mode): either way the caller's calls belong here.
   */
  holdsSession(caller: string): boolean {
    return this.#sessions.has(caller) || this.#waitsForSession(caller);
  }

  /** The callers that have an instance of their own here now, or a call waiting for their first one. */
  sessionCallers(): Set<string> {
    const callers = new Set(this.#sessions.keys());
    for (const w of this.#waiters) if (!w.anyInstance && w.caller !== undefined) callers.add(w.caller);
    return callers;
  }

  #waitsForSession(caller: string): boolean {
    return this.#waiters.some((w) => !w.anyInstance && w.caller === caller);
  }

  /**
   * Gives up `caller`'s session here: another worker holds it now (two workers came to hold one caller at once).
   * Its instance takes no call of the caller again, and is stopped once the calls it runs end; the caller's next
   * call here would start a new session.
   */
  giveUpSession(caller: string): void {
    const entry = this.#sessions.get(caller);
    if (entry === undefined) return;
    this.#sessions.delete(caller);
    entry.given = true;
    if (entry.inFlight === 0) void this.#retire(entry);
  }

  /**
   * Whether a call of `caller` would wait for a slot that only a running call's end (or a session's reaping) frees:
   * every usable instance at `callsPerInstance`, or calls already waiting, and no further instance to start within
   * `max`. A `perCaller` caller with a session here is never told so: its calls belong on its instance. A pool that is
   * not running is not full (its calls fail at once, as they must).
   */
  isFull(caller: string | undefined, waiting = false): boolean {
    if (this.#state !== 'running') return false;
    const { max, callsPerInstance } = this.options.instances;
    const perCaller = this.options.session === 'perCaller' && caller !== undefined;
    // A caller with an instance here, or one coming: its calls belong on it, however busy the rest is. (Asked for a
    // call that waits itself, its own wait is no instance coming.)
    if (perCaller && (this.#sessions.has(caller) || (!waiting && this.#waitsForSession(caller)))) return false;
    if (this.#liveCount() < max) return false;
    const usable = [...this.#entries].filter((e) => !e.retiring && e.instance.alive && e.inFlight < callsPerInstance && (!perCaller || e.caller === undefined));
    return usable.length === 0 || (!perCaller && this.#waiters.length > (waiting ? 1 : 0));
  }

  /** What the pool is doing now. */
  status(): McpServerPoolStatus {
    return {
      state: this.#state,
      instances: [...this.#entries].filter((e) => !e.retiring).map((e) => ({ id: e.instance.id, pid: e.instance.pid, inFlight: e.inFlight, caller: e.caller })),
      starting: this.#starting.size,
      waiting: this.#waiters.length,
      lastError: this.#lastError,
    };
  }

  /** Fails waiting calls, then ends every instance (those still starting too) and resolves once all are gone. */
  async close(): Promise<void> {
    if (this.#state !== 'closed') this.#state = 'closed';
    clearTimeout(this.#restartTimer);
    clearTimeout(this.#toolsChangedTimer);
    this.#rejectWaiters(new UnavailableError('the pool was closed', { what: `MCP server '${this.options.server}'` }));
    // A launch that ends now sees the pool closed and closes its instance itself; one still waiting for its
    // server's `initialize` answer is given up, its process killed.
    this.#closing.abort(new UnavailableError('the pool was closed', { what: `MCP server '${this.options.server}'` }));
    await Promise.all([...this.#starting]);
    await Promise.all([...this.#entries].map((e) => this.#retire(e)));
  }

  #liveCount(): number {
    return this.#entries.size + this.#starting.size;
  }

  /** The entry of a slot reserved for this call, if it is still fit to run it; a slot of a dead instance is given back. */
  #takeReserved(slot: McpPoolSlot | undefined): Entry | undefined {
    if (!(slot instanceof ReservedSlot) || slot.pool !== this || !slot.take()) return undefined;
    const { entry } = slot;
    if (!entry.retiring && entry.instance.alive) return entry;
    this.#release(entry);
    return undefined;
  }

  #acquire(caller: string | undefined, anyInstance: boolean, signal: AbortSignal | undefined, what: string, onCancellable?: (cancel: (reason: unknown) => void) => void): Promise<Entry> {
    if (this.#state !== 'running') return Promise.reject(this.#notRunning());
    if (signal?.aborted === true) return Promise.reject(new CancelledError(what, reasonText(signal.reason)));
    return new Promise<Entry>((resolve, reject) => {
      const cancel = (reason: unknown): void => {
        // Once given a slot (or failed), the waiter is no longer waiting: nothing to stop.
        if (!this.#waiters.includes(waiter)) return;
        this.#waiters = this.#waiters.filter((w) => w !== waiter);
        signal?.removeEventListener('abort', onAbort);
        reject(new CancelledError(what, reasonText(reason)));
      };
      const onAbort = (): void => cancel(signal?.reason);
      const waiter: Waiter = {
        caller,
        anyInstance,
        resolve: (entry) => {
          signal?.removeEventListener('abort', onAbort);
          resolve(entry);
        },
        reject: (err) => {
          signal?.removeEventListener('abort', onAbort);
          reject(err);
        },
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      // A listing goes before the calls waiting: it is one short request, and what the fleet admits waits on it (a
      // server that changed a tool's schema has its new one checked only once it is read), while a worker may hold
      // many calls for a busy server.
      if (anyInstance) this.#waiters.unshift(waiter);
      else this.#waiters.push(waiter);
      onCancellable?.(cancel);
      this.#dispatch();
    });
  }

  /** Gives each waiter, in order, a slot if one fits it; a waiter whose own instance is busy does not hold up the others. */
  #dispatch(): void {
    const still: Waiter[] = [];
    for (const waiter of this.#waiters) {
      const entry = this.#slotFor(waiter);
      if (entry === undefined) {
        still.push(waiter);
        continue;
      }
      entry.inFlight += 1;
      // Only a listing takes any instance. It leaves the idle timer running: a caller's instance read between its
      // calls (a re-import when another instance comes up) is still reaped idleMs after its caller's last call.
      if (waiter.anyInstance) {
        entry.listings += 1;
        this.#listed = true;
      } else {
        clearTimeout(entry.idleTimer);
      }
      waiter.resolve(entry);
    }
    this.#waiters = still;
    this.#ensureCapacity();
  }

  #slotFor(waiter: Waiter): Entry | undefined {
    const cap = this.options.instances.callsPerInstance;
    const usable = [...this.#entries].filter((e) => !e.retiring && e.instance.alive && e.inFlight < cap);
    if (this.options.session === 'shared' || waiter.anyInstance || waiter.caller === undefined) {
      return usable.reduce<Entry | undefined>((best, e) => (best === undefined || e.inFlight < best.inFlight ? e : best), undefined);
    }
    const own = this.#sessions.get(waiter.caller);
    if (own !== undefined) return own.inFlight < cap ? own : undefined;
    const spare = usable.find((e) => e.caller === undefined);
    if (spare !== undefined) {
      spare.caller = waiter.caller;
      this.#sessions.set(waiter.caller, spare);
    }
    return spare;
  }

  /** Gives a slot back: a call's (or a reservation's) ends the instance's use now; a listing's changes nothing of it. */
  #release(entry: Entry, what: 'call' | 'listing' = 'call'): void {
    entry.inFlight -= 1;
    if (what === 'listing') entry.listings -= 1;
    else entry.idleSince = Date.now();
    if (entry.given === true && entry.inFlight === 0) void this.#retire(entry);
    // Idle once no call holds it; a listing that outlived the idle time has the instance reaped as it ends.
    else if (entry.inFlight === entry.listings) this.#scheduleIdle(entry);
    this.#dispatch();
  }

  /** Starts instances while demand (or `min`) asks for more than run, within `max` and the restart backoff. */
  #ensureCapacity(): void {
    if (this.#state !== 'running') return;
    const { min, max, callsPerInstance } = this.options.instances;
    let demand: number;
    if (this.options.session === 'shared') {
      const inFlight = [...this.#entries].reduce((n, e) => n + e.inFlight, 0);
      demand = Math.ceil((inFlight + this.#waiters.length) / callsPerInstance);
    } else {
      const assigned = [...this.#entries].filter((e) => e.caller !== undefined).length;
      const newCallers = new Set(this.#waiters.filter((w) => !w.anyInstance && w.caller !== undefined && !this.#sessions.has(w.caller)).map((w) => w.caller)).size;
      const listing = this.#waiters.some((w) => w.anyInstance) ? 1 : 0;
      demand = Math.max(assigned + newCallers, listing);
    }
    const wanted = Math.min(max, Math.max(min, demand));
    const missing = wanted - this.#liveCount();
    if (missing <= 0) return;
    const wait = this.#nextStartAt - Date.now();
    if (wait > 0) {
      this.#restartTimer ??= setTimeout(() => {
        this.#restartTimer = undefined;
        this.#ensureCapacity();
      }, wait);
      return;
    }
    for (let i = 0; i < missing; i += 1) void this.#launch();
  }

  /** Starts one instance; resolves with the error when it could not be started (never rejects). */
  #launch(): Promise<Error | undefined> {
    const { server, launch } = this.options;
    const onToolsChanged = (): void => this.#toolsChanged();
    const startSignal = this.#closing.signal;
    const starting: Promise<UpstreamInstance> = isHttpLaunch(launch)
      ? HttpMcpInstance.start({ server, launch, onToolsChanged, startSignal })
      : McpInstance.start({ server, launch, tools: this.#launchTools, onToolsChanged, onStderr: (line, pid) => this.emit('stderr', { pid, line }), onUnreadable: (text, pid) => this.emit('unreadable', { pid, text }), startSignal });
    const started = starting.then(
      async (instance) => {
        this.#starting.delete(started);
        if (this.#state !== 'running') {
          await instance.close();
          return undefined;
        }
        const now = Date.now();
        const entry: Entry = { instance, startedAt: now, inFlight: 0, listings: 0, idleSince: now, caller: undefined, retiring: false, unresponsive: false, idleTimer: undefined };
        this.#entries.add(entry);
        instance.on('exit', (exit) => this.#onExit(entry, exit));
        this.emit('instanceStarted', { instance: instance.id, pid: instance.pid });
        // Instances up before the first listing are what it reads; one coming up after it (a replacement, a
        // scale-up, a caller's session) may list otherwise, though it announces nothing: it is a change to follow.
        if (this.#listed) this.#toolsChanged();
        this.#scheduleIdle(entry);
        this.#dispatch();
        return undefined;
      },
      (err: unknown) => {
        this.#starting.delete(started);
        const error = err instanceof Error ? err : new Error(String(err));
        if (this.#state !== 'running') return error;
        this.#lastError = error;
        this.emit('startFailed', { error });
        // A launch the configuration itself rules out (a command or cwd outside the sandbox's view) fails the same
        // way every time: the pool stops at once rather than retry its way to a crash loop.
        if (err instanceof ConfigInvalidError) {
          this.#stop(error);
          return error;
        }
        this.#recordFailure(error);
        this.#ensureCapacity();
        return error;
      },
    );
    this.#starting.add(started);
    return started;
  }

  #onExit(entry: Entry, exit: McpInstanceExit): void {
    this.#entries.delete(entry);
    clearTimeout(entry.idleTimer);
    if (entry.caller !== undefined && this.#sessions.get(entry.caller) === entry) this.#sessions.delete(entry.caller);
    const failed = !exit.expected || entry.unresponsive;
    const why = entry.unresponsive ? "stopped answering (no answer to a ping after a call's timeout): the worker ended it" : (exit.cause ?? (exit.pid === undefined ? 'ended' : 'died'));
    this.emit('instanceExited', { ...exit, failed, why });
    if (failed && this.#state === 'running') {
      // A long, healthy run ends the run of failures: the next restart waits only the initial delay.
      if (Date.now() - entry.startedAt >= this.options.restart.stableAfterMs) this.#failuresInARow = 0;
      const detail = exit.detail === '' ? '' : exit.pid === undefined ? `: ${exit.detail}` : `; its stderr: ${exit.detail.slice(-1000)}`;
      this.#recordFailure(new UnavailableError(`an instance (${exit.instance}) ${why}${detail}`, { what: `MCP server '${this.options.server}'` }));
    }
    this.#dispatch();
  }

  #recordFailure(error: Error): void {
    const now = Date.now();
    const { restart } = this.options;
    this.#failureTimes = [...this.#failureTimes.filter((t) => now - t < restart.crashLoopWindowMs), now];
    this.#failuresInARow += 1;
    this.#nextStartAt = now + restartDelayMs(this.#failuresInARow, restart);
    if (isCrashLoop(this.#failureTimes, now, restart)) this.#stop(error);
  }

  /** A crash loop: no more restarts, waiting calls fail, running instances are ended. */
  #stop(cause: Error): void {
    this.#state = 'stopped';
    const { restart, server } = this.options;
    // The last failure's own reason, not its whole message: that names the server and says "send again" too.
    const last = isFleetError(cause) && typeof cause.details.reason === 'string' ? cause.details.reason : cause.message;
    this.#lastError = new UnavailableError(`it failed ${restart.crashLoopFailures} times within ${restart.crashLoopWindowMs} ms and is not restarted again for now; last: ${last}`, { what: `MCP server '${server}'`, cause });
    clearTimeout(this.#restartTimer);
    this.#rejectWaiters(this.#lastError);
    for (const entry of this.#entries) void this.#retire(entry);
    this.emit('stopped', { error: this.#lastError });
  }

  #rejectWaiters(error: Error): void {
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const waiter of waiters) waiter.reject(error);
  }

  #notRunning(): Error {
    if (this.#state === 'stopped' && this.#lastError !== undefined) return this.#lastError;
    return new UnavailableError(`the pool is ${this.#state}`, { what: `MCP server '${this.options.server}'` });
  }

  /**
   * Reaps an instance `idleMs` after {@link Entry.idleSince}, counted from its last call whatever reads it meanwhile:
   * a listing neither restarts the count nor saves it (one in flight when the time comes only delays the reaping to
   * its end). Else an instance read by every re-import lived up to twice `idleMs`, while a caller beyond `max` waited.
   */
  #scheduleIdle(entry: Entry): void {
    clearTimeout(entry.idleTimer);
    entry.idleTimer = undefined;
    if (entry.retiring || entry.inFlight > entry.listings) return;
    const left = entry.idleSince + this.options.instances.idleMs - Date.now();
    if (left <= 0) {
      this.#reapIdle(entry);
      return;
    }
    // Looked at again when it fires: a call that came and went meanwhile has moved idleSince on.
    const timer = setTimeout(() => this.#scheduleIdle(entry), left);
    // Idle reaping alone must not keep a worker's event loop alive.
    timer.unref();
    entry.idleTimer = timer;
  }

  /** An idle instance retires: in `perCaller` mode its session ends; in `shared` mode only one above `min` goes. */
  #reapIdle(entry: Entry): void {
    // A listing reading it still: its release looks again.
    if (entry.inFlight > 0 || this.#state !== 'running') return;
    const aboveMin = [...this.#entries].filter((e) => !e.retiring).length > this.options.instances.min;
    if (entry.caller !== undefined || aboveMin) void this.#retire(entry);
  }

  async #retire(entry: Entry): Promise<void> {
    entry.retiring = true;
    clearTimeout(entry.idleTimer);
    if (entry.caller !== undefined && this.#sessions.get(entry.caller) === entry) this.#sessions.delete(entry.caller);
    await entry.instance.close();
  }

  /** After a timeout: an instance that does not answer a ping has stopped answering, and is replaced. */
  async #checkResponsive(entry: Entry): Promise<void> {
    if (entry.retiring || !entry.instance.alive) return;
    if (await entry.instance.ping(this.options.pingTimeoutMs)) return;
    if (entry.retiring || !entry.instance.alive) return;
    entry.unresponsive = true;
    entry.retiring = true;
    if (entry.caller !== undefined && this.#sessions.get(entry.caller) === entry) this.#sessions.delete(entry.caller);
    entry.instance.abandon();
  }

  /** One `toolsChanged` for every burst of notifications and instance starts: the first starts the window, the rest join it. */
  #toolsChanged(): void {
    if (this.#state !== 'running' || this.#toolsChangedTimer !== undefined) return;
    this.#toolsChangedTimer = setTimeout(() => {
      this.#toolsChangedTimer = undefined;
      if (this.#state === 'running') this.emit('toolsChanged');
    }, TOOLS_CHANGED_COALESCE_MS);
  }
}

/** A slot held for a call that has not started yet (see {@link McpServerPool.reserve}). */
export interface McpPoolSlot {
  /** Gives the slot back, unless its call took it; a second release is a no-op. */
  release(): void;
}

class ReservedSlot implements McpPoolSlot {
  #done = false;

  constructor(
    readonly pool: McpServerPool,
    readonly entry: Entry,
    private readonly giveBack: () => void,
  ) {}

  /** The call takes the slot: true the first time, if it was not given back. */
  take(): boolean {
    if (this.#done) return false;
    this.#done = true;
    return true;
  }

  release(): void {
    if (this.take()) this.giveBack();
  }
}

function reasonText(reason: unknown): string {
  if (reason instanceof Error) return reason.message;
  return typeof reason === 'string' ? reason : 'aborted';
}
