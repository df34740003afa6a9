import {
  CancelledError,
  ConfigInvalidError,
  type FleetError,
  InternalError,
  isFleetError,
  type Tool,
  type ToolCall,
  type ToolContext,
  type ToolExecutor,
  ToolNotFoundError,
  type ToolResult,
} from '@forge-fleet/shared';
import type { Logger } from 'pino';
import { bundleTools, type SandboxBundle } from './bundle.js';
import { DEFAULT_LIMITS, launchCommand, lifetimeCpuSeconds, type LaunchCommand, type SandboxLimits } from './launch.js';
import { probeIsolation, type ProbeResult } from './probe.js';
import { BystanderError, SandboxProcess } from './sandbox-process.js';

/** What keeps a sandboxed handler in, as found on this machine at start-up. */
export interface SandboxIsolation {
  /** `namespace`: an empty network namespace (no interfaces up, not even loopback). `none`: the host's network. */
  readonly network: 'namespace' | 'none';
  /** `namespace`: a PID namespace, so a handler can neither see nor signal the worker or other processes. */
  readonly processes: 'namespace' | 'none';
  /** Node's permission model: read access to the bundle file only, no writes, no child processes, no worker threads. */
  readonly filesystem: 'permission-model';
  /** How CPU time, data size, open files and core dumps are capped. */
  readonly rlimits: 'prlimit' | 'ulimit' | 'none';
  /** The V8 heap cap (`--max-old-space-size`) is always set; the data rlimit caps off-heap memory where rlimits are in force. */
  readonly memory: 'heap+rlimit' | 'heap';
  /** cgroup v2 is only probed: `writable` means it could be used, which this version does not do yet. */
  readonly cgroup: 'writable' | 'unavailable';
  /** The sandbox process starts with no environment variables at all. */
  readonly environment: 'empty';
}

/** A sandbox process started, or ended (`reason`: see SandboxProcess.stopReason). */
export type SandboxProcessEvent = { readonly kind: 'started' } | { readonly kind: 'stopped'; readonly reason: string };

export interface SandboxOptions {
  /** The tools module (TypeScript or JavaScript); it is bundled once, at start. */
  readonly modulePath: string;
  /** The tools to serve from it; their names must be in the module. */
  readonly tools: readonly Tool[];
  /** Warm sandbox processes. @defaultValue 2 */
  readonly size?: number;
  /**
   * Calls one process runs at once; calls beyond `size × callsPerProcess`
   * wait. 1 gives every call a process of its own (strictest per-call CPU
   * accounting and blast radius, at a process wake-up per call).
   * @defaultValue 32
   */
  readonly callsPerProcess?: number;
  /** @defaultValue {@link DEFAULT_LIMITS} */
  readonly limits?: Partial<SandboxLimits>;
  readonly log: Logger;
  /** Hears each sandbox process start and end (the worker counts them as metrics). */
  readonly onProcess?: ((event: SandboxProcessEvent) => void) | undefined;
  /**
   * Export conditions used to resolve the module's imports when bundling.
   * @defaultValue the `--conditions` this process was started with
   */
  readonly conditions?: readonly string[];
  /**
   * How long a cancelled or timed-out handler has to settle before its process is killed.
   * @defaultValue 1000
   */
  readonly cancelGraceMs?: number;
}

/** A pool of warm sandbox processes serving the tools of one module. */
export interface Sandbox {
  readonly isolation: SandboxIsolation;
  readonly limits: SandboxLimits;
  /** @throws ToolNotFoundError when the sandbox does not serve `name`. */
  executorFor(name: string): ToolExecutor;
  /** Kills every sandbox process and removes the bundle; calls still running fail with CANCELLED. */
  close(): Promise<void>;
}

/** Conditions from `--conditions=x` / `-C x` in this process's own flags. */
function ownConditions(): string[] {
  const found: string[] = [];
  const argv = process.execArgv;
  argv.forEach((arg, i) => {
    if (arg.startsWith('--conditions=')) found.push(arg.slice('--conditions='.length));
    else if ((arg === '--conditions' || arg === '-C') && argv[i + 1] !== undefined) found.push(argv[i + 1] ?? '');
  });
  return found;
}

export function isolationOf(probe: ProbeResult): SandboxIsolation {
  const rlimits = probe.prlimit ? 'prlimit' : probe.shell ? 'ulimit' : 'none';
  return Object.freeze({
    network: probe.unshare ? 'namespace' : 'none',
    processes: probe.unshare ? 'namespace' : 'none',
    filesystem: 'permission-model',
    rlimits,
    memory: rlimits === 'none' ? 'heap' : 'heap+rlimit',
    cgroup: probe.cgroupV2 === undefined ? 'unavailable' : 'writable',
    environment: 'empty',
  });
}

function checkLimits(limits: SandboxLimits, size: number): void {
  const problems: string[] = [];
  if (!(limits.cpuSeconds > 0)) problems.push(`limits.cpuSeconds must be positive, got ${limits.cpuSeconds}`);
  if (!(limits.memoryMb >= 16)) problems.push(`limits.memoryMb must be at least 16, got ${limits.memoryMb}`);
  if (!(limits.outputBytes >= 1024)) problems.push(`limits.outputBytes must be at least 1024, got ${limits.outputBytes}`);
  if (!Number.isInteger(size) || size < 1) problems.push(`size must be a positive integer, got ${size}`);
  if (problems.length > 0) throw new ConfigInvalidError('sandbox options', problems);
}

/**
 * Bundles the tools module, probes the isolation layers and starts `size`
 * warm sandbox processes.
 *
 * @throws ConfigInvalidError for bad options, a module that cannot be bundled, or tools missing from it.
 * @throws InternalError when no sandbox process can start.
 */
export async function startSandbox(options: SandboxOptions): Promise<Sandbox> {
  const limits: SandboxLimits = { ...DEFAULT_LIMITS, ...options.limits };
  const size = options.size ?? 2;
  const perProcess = options.callsPerProcess ?? 32;
  checkLimits(limits, size);
  if (!Number.isInteger(perProcess) || perProcess < 1) throw new ConfigInvalidError('sandbox options', [`callsPerProcess must be a positive integer, got ${perProcess}`]);
  const probe = probeIsolation();
  const isolation = isolationOf(probe);
  const log = options.log.child({ component: 'sandbox' });
  if (isolation.network === 'none') log.warn('unshare cannot create user/network/PID namespaces here: sandboxed handlers can reach the network and signal other processes of this user');
  if (isolation.rlimits === 'none') log.warn('neither prlimit nor /bin/sh is available: sandboxed handlers run without CPU-time, data-size and open-file rlimits');
  if (isolation.cgroup === 'writable') log.info({ cgroup: probe.cgroupV2 }, 'cgroup v2 is writable but not used yet; rlimits and the heap cap apply');
  const bundle = await bundleTools(options.modulePath, options.conditions ?? ownConditions());
  const command = launchCommand({ probe, nodePath: process.execPath, bundlePath: bundle.path, limits });
  const pool = new SandboxPool(command, limits, size, perProcess, options.cancelGraceMs ?? 1000, bundle, isolation, log);
  pool.onProcess = options.onProcess;
  try {
    await pool.fill(options.tools.map((t) => t.definition.name));
  } catch (error) {
    await pool.close();
    throw error;
  }
  log.info({ isolation, limits, size, callsPerProcess: perProcess, bundle: bundle.path }, 'sandbox ready');
  return pool;
}

/** Waiting calls past which the cancelled ones among them are dropped at once rather than at their turn. */
const PRUNE_WAITERS_AT = 1024;

interface Waiter {
  readonly resolve: (process: SandboxProcess) => void;
  readonly reject: (error: FleetError) => void;
  /** The call's signal: a waiter whose call was cancelled meanwhile is dropped when its turn comes. */
  readonly signal: AbortSignal;
  readonly name: string;
}

class SandboxPool implements Sandbox {
  readonly #all = new Set<SandboxProcess>();
  /** Calls handed to each live process and not yet released. */
  readonly #assigned = new Map<SandboxProcess, number>();
  /** Processes near their lifetime CPU rlimit: they take no new calls and go once idle. */
  readonly #retiring = new Set<SandboxProcess>();
  readonly #waiters: Waiter[] = [];
  #starting = 0;
  #closed = false;
  #served = new Set<string>();
  /** See SandboxOptions.onProcess; the quarantine lane reports to the same listener. */
  onProcess: ((event: SandboxProcessEvent) => void) | undefined;
  #quarantine: SandboxPool | undefined;

  constructor(
    readonly command: LaunchCommand,
    readonly limits: SandboxLimits,
    readonly size: number,
    readonly perProcess: number,
    readonly cancelGraceMs: number,
    readonly bundle: SandboxBundle,
    readonly isolation: SandboxIsolation,
    readonly log: Logger,
    /** Whether closing removes the bundle (the quarantine lane shares its parent's). */
    readonly ownsBundle = true,
  ) {}

  async fill(wanted: readonly string[]): Promise<void> {
    const settled = await Promise.allSettled(Array.from({ length: this.size }, () => SandboxProcess.start(this.command, this.limits, this.log)));
    const started = settled.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
    // Adopted first, so that close() reaches the processes that did start.
    for (const { process } of started) this.#adopt(process);
    const failed = settled.find((s) => s.status === 'rejected');
    if (failed !== undefined) throw failed.reason;
    const bundled = new Set(started[0]?.tools ?? []);
    const missing = wanted.filter((name) => !bundled.has(name));
    if (missing.length > 0) {
      throw new ConfigInvalidError('sandbox tools', [`the bundled module ${JSON.stringify(this.bundle.path)} has no handler for: ${missing.join(', ')}; pass the module the tools came from`]);
    }
    this.#served = new Set(wanted);
  }

  executorFor(name: string): ToolExecutor {
    if (!this.#served.has(name)) throw new ToolNotFoundError(name, { known: [...this.#served], remedy: 'serve it from the sandbox\'s tools module' });
    return { name, execute: (call, ctx) => this.#execute(name, call, ctx) };
  }

  async close(): Promise<void> {
    this.#closed = true;
    for (const waiter of this.#waiters.splice(0)) waiter.reject(new CancelledError('(sandbox)', 'the sandbox is closing'));
    const all = [...this.#all];
    for (const process of all) process.kill(new CancelledError('(sandbox)', 'the sandbox is closing'));
    await Promise.all([...all.map((p) => p.exited), this.#quarantine?.close()]);
    if (this.ownsBundle) await this.bundle.remove();
  }

  async #execute(name: string, call: ToolCall, ctx: ToolContext): Promise<ToolResult> {
    const process = await this.#acquire(ctx.signal, name);
    const request = { type: 'run', callId: call.id, tool: name, arguments: call.arguments, attempt: ctx.attempt, tier: ctx.tier, trust: ctx.trust, env: ctx.env } as const;
    try {
      return (await process.run(request, ctx.signal, this.cancelGraceMs, (update) => ctx.progress(update))) as ToolResult;
    } catch (error) {
      if (!(error instanceof BystanderError)) throw error;
      // Its process went down for another call (or nobody can tell whose): run it again, alone.
      this.log.info({ callId: call.id, tool: name, why: String(error.why instanceof Error ? error.why.code : error.why) }, 'sandbox process lost under a shared load; running the call again alone');
      return this.#alone().#execute(name, call, ctx);
    } finally {
      this.#release(process);
    }
  }

  /**
   * The quarantine lane: processes that run one call each, started on first
   * need. Calls whose shared process failed run here, so a failure lands on
   * the call that causes it. (A call that waits for ever holds its lane
   * until its timeout or cancellation, as it would have held its slot.)
   */
  #alone(): SandboxPool {
    this.#quarantine ??= new SandboxPool(this.command, this.limits, Math.max(2, this.size), 1, this.cancelGraceMs, this.bundle, this.isolation, this.log.child({ lane: 'alone' }), false);
    this.#quarantine.#served = this.#served;
    this.#quarantine.onProcess = this.onProcess;
    return this.#quarantine;
  }

  /** The live process with the most room, or none when every one is full (or retiring). */
  #roomiest(): SandboxProcess | undefined {
    let best: SandboxProcess | undefined;
    let bestLoad = this.perProcess;
    for (const [process, assigned] of this.#assigned) {
      if (assigned < bestLoad && process.alive && !this.#retiring.has(process)) {
        best = process;
        bestLoad = assigned;
      }
    }
    return best;
  }

  #take(process: SandboxProcess): SandboxProcess {
    this.#assigned.set(process, (this.#assigned.get(process) ?? 0) + 1);
    return process;
  }

  #acquire(signal: AbortSignal, name: string): Promise<SandboxProcess> {
    if (this.#closed) return Promise.reject(new CancelledError(name, 'the sandbox is closed'));
    const room = this.#roomiest();
    if (room !== undefined) return Promise.resolve(this.#take(room));
    this.#topUp();
    // No abort listener per waiting call (under load most calls wait here, and adding and removing one was
    // measurable): the caller's run ends at the abort by itself (runExecutor answers CANCELLED at once), and
    // the waiter, checked when its turn comes, leaves without taking a slot.
    // Cancelled waiters wait for their turn to leave; should the queue grow long behind stuck processes, they go now.
    if (this.#waiters.length >= PRUNE_WAITERS_AT) this.#pruneCancelled();
    return new Promise((resolve, reject) => this.#waiters.push({ resolve, reject, signal, name }));
  }

  #pruneCancelled(): void {
    const live = this.#waiters.filter((w) => !w.signal.aborted);
    for (const waiter of this.#waiters) {
      if (waiter.signal.aborted) waiter.reject(isFleetError(waiter.signal.reason) ? waiter.signal.reason : new CancelledError(waiter.name, String(waiter.signal.reason)));
    }
    this.#waiters.splice(0, this.#waiters.length, ...live);
  }

  #release(process: SandboxProcess): void {
    const assigned = (this.#assigned.get(process) ?? 1) - 1;
    if (this.#assigned.has(process)) this.#assigned.set(process, assigned);
    if (!process.alive) return this.#forget(process);
    // RLIMIT_CPU counts a process's whole life; retire it before a call could meet it early.
    const used = process.recentCpuSeconds;
    if (used !== undefined && used > lifetimeCpuSeconds(this.limits) - this.limits.cpuSeconds - 0.5) this.#retiring.add(process);
    if (this.#retiring.has(process)) {
      if (assigned === 0) {
        process.kill(new InternalError('retired'));
        this.#forget(process);
      }
      return;
    }
    this.#serveWaiters();
  }

  /** Hands free room to calls waiting for it, oldest first. */
  #serveWaiters(): void {
    if (this.#closed) return;
    for (let room = this.#roomiest(); room !== undefined && this.#waiters.length > 0; room = this.#roomiest()) {
      const waiter = this.#waiters.shift()!;
      const { signal } = waiter;
      if (signal.aborted) waiter.reject(isFleetError(signal.reason) ? signal.reason : new CancelledError(waiter.name, String(signal.reason)));
      else waiter.resolve(this.#take(room));
    }
  }

  #adopt(process: SandboxProcess): void {
    if (this.#closed) {
      process.kill(new CancelledError('(sandbox)', 'the sandbox is closing'));
      return;
    }
    this.#all.add(process);
    this.onProcess?.({ kind: 'started' });
    this.#assigned.set(process, 0);
    void process.exited.then(() => this.#forget(process));
    this.#serveWaiters();
  }

  #forget(process: SandboxProcess): void {
    if (!this.#all.delete(process)) return;
    this.onProcess?.({ kind: 'stopped', reason: process.stopReason });
    this.#assigned.delete(process);
    this.#retiring.delete(process);
    this.#topUp();
  }

  /** Keeps the pool at its size: replaces dead processes in the background. */
  #topUp(): void {
    while (!this.#closed && this.#all.size + this.#starting < this.size) {
      this.#starting += 1;
      SandboxProcess.start(this.command, this.limits, this.log).then(
        ({ process }) => {
          this.#starting -= 1;
          this.#adopt(process);
        },
        (error: unknown) => {
          this.#starting -= 1;
          this.log.error({ err: error }, 'a replacement sandbox process failed to start');
          // Calls waiting for a process would otherwise wait for ever.
          const failure = isFleetError(error) ? error : new InternalError(String(error));
          if (this.#all.size === 0) for (const waiter of this.#waiters.splice(0)) waiter.reject(failure);
        },
      );
    }
  }
}
