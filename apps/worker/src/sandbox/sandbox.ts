import {
  CancelledError,
  ConfigInvalidError,
  type FleetError,
  InternalError,
  isFleetError,
  type ProcessIsolation,
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
import { BIND_CALLER, type CallerBoundExecutor } from '../tools/caller-executor.js';
import { idleToReap, isolationFor, ownerOf, pickProcess, planRoom, type ProcessView, resolveAssignment } from './process-assignment.js';
import { BystanderError, SandboxProcess } from './sandbox-process.js';
import { weakened } from './strict.js';

/** What keeps a sandboxed handler in, as found on this machine at start-up. */
export interface SandboxIsolation {
  /** `namespace`: an empty network namespace (no interfaces up, not even loopback). `none`: the host's network. */
  readonly network: 'namespace' | 'none';
  /** `namespace`: a PID namespace, so a handler can neither see nor signal the worker or other processes. */
  readonly processes: 'namespace' | 'none';
  /**
   * Node's permission model: read access to the bundle file only, no writes, no child processes, no worker
   * threads. `bubblewrap+permission-model`: under it, a mount namespace whose whole filesystem is Node, its
   * libraries and the bundle, read-only — no host Unix socket (Docker's, Redis's) exists there to connect to.
   */
  readonly filesystem: 'bubblewrap+permission-model' | 'permission-model';
  /**
   * What becomes of a sandbox process when its worker dies, even by SIGKILL: `killed` (bubblewrap's
   * `--die-with-parent`, or `setpriv --pdeathsig`); `exit-on-channel-close`: it exits when it reads the
   * channel's end, which a process busy or frozen in a call never does.
   */
  readonly orphans: 'killed' | 'exit-on-channel-close';
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
  /**
   * Warm spare processes kept ready: a process nobody owns yet, so the first
   * call of a new caller (or, under `call` isolation, any call) need not wait
   * for a start. A spare taken is replaced in the background.
   * @defaultValue 2
   */
  readonly size?: number;
  /**
   * Calls one process runs at once (of its one caller). A caller's calls
   * beyond that go to another process of its own, up to
   * `processesPerCaller`, then wait. 1 gives every call in flight a process
   * (strictest per-call CPU accounting and blast radius, at a process
   * wake-up per call).
   * @defaultValue 32
   */
  readonly callsPerProcess?: number;
  /**
   * Who one process may serve: `caller` — calls of one caller (token
   * subject) only, for the process's whole life; `call` — exactly one call,
   * after which the process is killed. A tool's own `sandboxIsolation` can
   * only make it stricter. See {@link AssignmentOptions}.
   * @defaultValue "caller"
   */
  readonly isolation?: ProcessIsolation;
  /** Processes at most. @defaultValue see {@link AssignmentOptions.maxProcesses} */
  readonly maxProcesses?: number;
  /** Processes one caller may hold at once. @defaultValue see {@link AssignmentOptions.processesPerCaller} */
  readonly processesPerCaller?: number;
  /** An owned process idle this long is stopped. @defaultValue see {@link AssignmentOptions.idleMs} */
  readonly idleMs?: number;
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
  /**
   * The tool's executor. The worker binds each call to its caller with
   * {@link executorForCaller} (the call runner does); called directly, it
   * runs calls as the anonymous caller.
   * @throws ToolNotFoundError when the sandbox does not serve `name`.
   */
  executorFor(name: string): CallerBoundExecutor;
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
    network: probe.bubblewrap || probe.unshare ? 'namespace' : 'none',
    processes: probe.bubblewrap || probe.unshare ? 'namespace' : 'none',
    filesystem: probe.bubblewrap ? 'bubblewrap+permission-model' : 'permission-model',
    orphans: probe.bubblewrap || probe.setpriv ? 'killed' : 'exit-on-channel-close',
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
  const { isolation: unit, maxProcesses, processesPerCaller, idleMs } = options;
  const assignment = resolveAssignment({
    ...(unit === undefined ? {} : { isolation: unit }),
    ...(maxProcesses === undefined ? {} : { maxProcesses }),
    ...(processesPerCaller === undefined ? {} : { processesPerCaller }),
    ...(idleMs === undefined ? {} : { idleMs }),
  });
  if (assignment.maxProcesses < size) throw new ConfigInvalidError('sandbox options', [`maxProcesses (${assignment.maxProcesses}) must be at least size (${size}), the spares kept warm`]);
  const probe = probeIsolation();
  const isolation = isolationOf(probe);
  const log = options.log.child({ component: 'sandbox' });
  if (isolation.network === 'none') log.warn('neither bwrap nor unshare can create user/network/PID namespaces here: sandboxed handlers can reach the network, and only a JavaScript guard keeps them from signalling other processes of this user');
  if (isolation.rlimits === 'none') log.warn('neither prlimit nor /bin/sh is available: sandboxed handlers run without CPU-time, data-size and open-file rlimits');
  if (isolation.cgroup === 'writable') log.info({ cgroup: probe.cgroupV2 }, 'cgroup v2 is writable but not used yet; rlimits and the heap cap apply');
  for (const layer of weakened(isolation)) log.warn({ layer }, 'sandbox layer not in force on this machine (--strict-sandbox does not require it)');
  const bundle = await bundleTools(options.modulePath, options.conditions ?? ownConditions());
  const command = launchCommand({ probe, nodePath: process.execPath, bundlePath: bundle.path, limits });
  const perCall = new Set(options.tools.filter((t) => isolationFor(assignment.isolation, t.definition.sandboxIsolation) === 'call').map((t) => t.definition.name));
  const rules: PoolRules = { warm: size, perProcess, perOwner: assignment.processesPerCaller, cap: assignment.maxProcesses, idleMs: assignment.idleMs, perCall };
  const pool = new SandboxPool(command, limits, rules, options.cancelGraceMs ?? 1000, bundle, isolation, log);
  pool.onProcess = options.onProcess;
  try {
    await pool.fill(options.tools.map((t) => t.definition.name));
  } catch (error) {
    await pool.close();
    throw error;
  }
  log.info({ isolation, limits, size, callsPerProcess: perProcess, processIsolation: assignment.isolation, perCallTools: [...perCall], maxProcesses: assignment.maxProcesses, processesPerCaller: assignment.processesPerCaller, bundle: bundle.path }, 'sandbox ready');
  return pool;
}

/** Waiting calls past which the cancelled ones among them are dropped at once rather than at their turn. */
const PRUNE_WAITERS_AT = 1024;

/** How one pool gives out its processes (process-assignment.ts decides; the pool applies it). */
interface PoolRules {
  /** Spares kept ready. */
  readonly warm: number;
  /** Calls one process runs at once. */
  readonly perProcess: number;
  /** Processes one owner may hold. */
  readonly perOwner: number;
  /** Processes at most, spares and retiring ones included. */
  readonly cap: number;
  /** An owned process idle this long is stopped. */
  readonly idleMs: number;
  /** Tools each of whose calls gets a process of its own, killed after it. */
  readonly perCall: ReadonlySet<string>;
}

interface Waiter {
  readonly resolve: (process: SandboxProcess) => void;
  readonly reject: (error: FleetError) => void;
  /** The call's signal: a waiter whose call was cancelled meanwhile is dropped when its turn comes. */
  readonly signal: AbortSignal;
  readonly name: string;
  /** Its process takes no other call and is killed after this one. */
  readonly perCall: boolean;
}

/** The pool's record of one live process. */
interface Slot extends ProcessView {
  readonly process: SandboxProcess;
  owner: string | undefined;
  load: number;
  lastUsedAt: number;
  retiring: boolean;
}

function cancelledReason(waiter: Waiter): FleetError {
  const reason: unknown = waiter.signal.reason;
  return isFleetError(reason) ? reason : new CancelledError(waiter.name, String(reason));
}

/**
 * The pool. Every process has one owner for life (process-assignment.ts):
 * a call runs only in a process of its own owner, or claims a spare, or
 * waits — never in another owner's process.
 */
class SandboxPool implements Sandbox {
  readonly #slots = new Map<SandboxProcess, Slot>();
  /** Calls waiting for a process, per owner, oldest first; owners in the order their wait began. */
  readonly #waiting = new Map<string, Waiter[]>();
  #waiters = 0;
  /** Owners whose waiting calls need a process made free, as of the last rebalance. */
  #needy = 0;
  #starting = 0;
  /** Numbers per-call owners. */
  #calls = 0;
  #closed = false;
  #balancing = false;
  #again = false;
  #served = new Set<string>();
  readonly #reaper: NodeJS.Timeout;
  /** See SandboxOptions.onProcess; the quarantine lane reports to the same listener. */
  onProcess: ((event: SandboxProcessEvent) => void) | undefined;
  #quarantine: SandboxPool | undefined;

  constructor(
    readonly command: LaunchCommand,
    readonly limits: SandboxLimits,
    readonly rules: PoolRules,
    readonly cancelGraceMs: number,
    readonly bundle: SandboxBundle,
    readonly isolation: SandboxIsolation,
    readonly log: Logger,
    /** Whether closing removes the bundle (the quarantine lane shares its parent's). */
    readonly ownsBundle = true,
  ) {
    // One sweep for every idle process, not a timer per process going idle (at 1 call in flight that is every call).
    this.#reaper = setInterval(() => this.#reap(), Math.max(50, Math.min(rules.idleMs / 2, 15_000)));
    this.#reaper.unref();
  }

  async fill(wanted: readonly string[]): Promise<void> {
    const settled = await Promise.allSettled(Array.from({ length: this.rules.warm }, () => SandboxProcess.start(this.command, this.limits, this.log)));
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

  executorFor(name: string): CallerBoundExecutor {
    if (!this.#served.has(name)) throw new ToolNotFoundError(name, { known: [...this.#served], remedy: 'serve it from the sandbox\'s tools module' });
    const as = (caller: string | undefined): ToolExecutor['execute'] => (call, ctx) => this.#execute(name, call, ctx, caller);
    return { name, execute: as(undefined), [BIND_CALLER]: (caller) => ({ name, execute: as(caller) }) };
  }

  async close(): Promise<void> {
    this.#closed = true;
    clearInterval(this.#reaper);
    for (const queue of this.#waiting.values()) for (const waiter of queue) waiter.reject(new CancelledError('(sandbox)', 'the sandbox is closing'));
    this.#waiting.clear();
    this.#waiters = 0;
    const all = [...this.#slots.keys()];
    for (const process of all) process.kill(new CancelledError('(sandbox)', 'the sandbox is closing'));
    await Promise.all([...all.map((p) => p.exited), this.#quarantine?.close()]);
    if (this.ownsBundle) await this.bundle.remove();
  }

  async #execute(name: string, call: ToolCall, ctx: ToolContext, caller: string | undefined): Promise<ToolResult> {
    const perCall = this.rules.perCall.has(name);
    const owner = ownerOf(caller, perCall ? 'call' : 'caller', () => ++this.#calls);
    const process = await this.#acquire(owner, perCall, ctx.signal, name);
    const request = { type: 'run', callId: call.id, tool: name, arguments: call.arguments, attempt: ctx.attempt, tier: ctx.tier, trust: ctx.trust, env: ctx.env } as const;
    try {
      return (await process.run(request, ctx.signal, this.cancelGraceMs, (update) => ctx.progress(update))) as ToolResult;
    } catch (error) {
      if (!(error instanceof BystanderError)) throw error;
      // Its process went down for another call of its caller (or nobody can tell whose): run it again, alone.
      this.log.info({ callId: call.id, tool: name, why: String(error.why instanceof Error ? error.why.code : error.why) }, 'sandbox process lost under a shared load; running the call again alone');
      return this.#alone().#execute(name, call, ctx, caller);
    } finally {
      this.#release(process);
    }
  }

  /**
   * The quarantine lane: a process per call, killed after it, started on
   * need. Calls whose shared process failed run here, so a failure lands on
   * the call that causes it. (A call that waits for ever holds its process
   * until its timeout or cancellation, as it would have held its slot.)
   */
  #alone(): SandboxPool {
    const lanes = Math.max(2, this.rules.warm);
    this.#quarantine ??= new SandboxPool(
      this.command,
      this.limits,
      { warm: 0, perProcess: 1, perOwner: 1, cap: lanes, idleMs: this.rules.idleMs, perCall: this.#served },
      this.cancelGraceMs,
      this.bundle,
      this.isolation,
      this.log.child({ lane: 'alone' }),
      false,
    );
    this.#quarantine.#served = this.#served;
    this.#quarantine.onProcess = this.onProcess;
    return this.#quarantine;
  }

  #acquire(owner: string, perCall: boolean, signal: AbortSignal, name: string): Promise<SandboxProcess> {
    if (this.#closed) return Promise.reject(new CancelledError(name, 'the sandbox is closed'));
    const pick = pickProcess(owner, this.#slots.values(), this.rules);
    if (pick.kind !== 'wait') return Promise.resolve(this.#take(pick.process, owner, perCall));
    // No abort listener per waiting call (under load most calls wait here, and adding and removing one was
    // measurable): the caller's run ends at the abort by itself (runExecutor answers CANCELLED at once), and
    // the waiter, checked when its turn comes, leaves without taking a slot.
    // Cancelled waiters wait for their turn to leave; should the queue grow long behind stuck processes, they go now.
    if (this.#waiters >= PRUNE_WAITERS_AT) this.#pruneCancelled();
    const waiting = new Promise<SandboxProcess>((resolve, reject) => {
      const queue = this.#waiting.get(owner);
      const waiter = { resolve, reject, signal, name, perCall };
      if (queue === undefined) this.#waiting.set(owner, [waiter]);
      else queue.push(waiter);
      this.#waiters += 1;
    });
    if (pick.needsProcess) this.#rebalance();
    return waiting;
  }

  #take(slot: Slot, owner: string, perCall: boolean): SandboxProcess {
    const claimed = slot.owner === undefined;
    slot.owner = owner;
    slot.load += 1;
    slot.lastUsedAt = performance.now();
    if (perCall) slot.retiring = true;
    // A spare taken is replaced in the background (a rebalance under way does it itself).
    if (claimed && !this.#balancing) this.#rebalance();
    return slot.process;
  }

  #release(process: SandboxProcess): void {
    const slot = this.#slots.get(process);
    if (slot === undefined) return;
    slot.load -= 1;
    slot.lastUsedAt = performance.now();
    if (!process.alive) return this.#forget(process);
    // RLIMIT_CPU counts a process's whole life; retire it before a call could meet it early.
    const used = process.recentCpuSeconds;
    if (used !== undefined && used > lifetimeCpuSeconds(this.limits) - this.limits.cpuSeconds - 0.5) slot.retiring = true;
    if (slot.retiring) {
      if (slot.load === 0) {
        process.kill(new InternalError('retired'));
        this.#forget(process);
      }
      return;
    }
    // The room goes to the owner's own waiting calls (the hot path: one owner's queue, not a pass over all).
    if (slot.owner !== undefined && this.#waiting.has(slot.owner)) this.#serveOwner(slot.owner);
    // An idle process may be what another owner waits for (taken over at the cap).
    if (slot.load === 0 && this.#needy > 0) this.#rebalance();
  }

  /** Hands room in its own processes (or a spare) to `owner`'s waiting calls, oldest first; true when its next call needs a process. */
  #serveOwner(owner: string): boolean {
    const queue = this.#waiting.get(owner);
    if (queue === undefined) return false;
    while (queue.length > 0) {
      const waiter = queue[0]!;
      if (waiter.signal.aborted) {
        queue.shift();
        this.#waiters -= 1;
        waiter.reject(cancelledReason(waiter));
        continue;
      }
      const pick = pickProcess(owner, this.#slots.values(), this.rules);
      if (pick.kind === 'wait') return pick.needsProcess;
      queue.shift();
      this.#waiters -= 1;
      waiter.resolve(this.#take(pick.process, owner, waiter.perCall));
    }
    this.#waiting.delete(owner);
    return false;
  }

  /**
   * Serves every waiting owner, then makes room as planRoom says: starts
   * spares, stops idle processes of other owners and drains busy ones at the
   * cap. Re-entrant calls (a process forgotten meanwhile) run one more pass.
   */
  #rebalance(): void {
    if (this.#closed) return;
    if (this.#balancing) {
      this.#again = true;
      return;
    }
    this.#balancing = true;
    try {
      do {
        this.#again = false;
        let needed = 0;
        for (const owner of [...this.#waiting.keys()]) if (this.#serveOwner(owner)) needed += 1;
        this.#needy = needed;
        const plan = planRoom([...this.#slots.values()], { needed, waiting: new Set(this.#waiting.keys()), starting: this.#starting, warm: this.rules.warm, cap: this.rules.cap });
        for (const slot of plan.drain) slot.retiring = true;
        // Stopped, not forgotten: it counts against the cap until it has exited (then its place is refilled).
        for (const slot of plan.evict) {
          slot.retiring = true;
          slot.process.kill(new InternalError('stopped for another caller'));
        }
        for (let i = 0; i < plan.start; i++) this.#startOne();
      } while (this.#again && !this.#closed);
    } finally {
      this.#balancing = false;
    }
  }

  #startOne(): void {
    this.#starting += 1;
    SandboxProcess.start(this.command, this.limits, this.log).then(
      ({ process }) => {
        this.#starting -= 1;
        this.#adopt(process);
      },
      (error: unknown) => {
        this.#starting -= 1;
        this.log.error({ err: error }, 'a sandbox process failed to start');
        // Calls waiting for a process would otherwise wait for ever (the next rebalance tries again).
        if (this.#starting === 0) this.#failNeedy(isFleetError(error) ? error : new InternalError(String(error)));
      },
    );
  }

  /** Fails the waiting calls of owners that have no process to wait for. */
  #failNeedy(failure: FleetError): void {
    for (const [owner, queue] of [...this.#waiting]) {
      if (!this.#needsProcess(owner)) continue;
      for (const waiter of queue) waiter.reject(failure);
      this.#waiters -= queue.length;
      this.#waiting.delete(owner);
    }
  }

  /** Whether `owner`'s next call needs a process made free (it owns none with room and may hold another). */
  #needsProcess(owner: string): boolean {
    const pick = pickProcess(owner, this.#slots.values(), this.rules);
    return pick.kind === 'wait' && pick.needsProcess;
  }

  #pruneCancelled(): void {
    for (const [owner, queue] of [...this.#waiting]) {
      const live = queue.filter((w) => !w.signal.aborted);
      for (const waiter of queue) if (waiter.signal.aborted) waiter.reject(cancelledReason(waiter));
      this.#waiters -= queue.length - live.length;
      if (live.length === 0) this.#waiting.delete(owner);
      else this.#waiting.set(owner, live);
    }
  }

  /** Stops owned processes idle for `idleMs`; spares stay, and the pool tops them up as processes go. */
  #reap(): void {
    if (this.#closed) return;
    for (const slot of idleToReap(this.#slots.values(), performance.now(), this.rules.idleMs)) {
      slot.retiring = true;
      slot.process.kill(new InternalError('idle'));
    }
  }

  #adopt(process: SandboxProcess): void {
    if (this.#closed) {
      process.kill(new CancelledError('(sandbox)', 'the sandbox is closing'));
      return;
    }
    this.#slots.set(process, { process, owner: undefined, load: 0, lastUsedAt: performance.now(), retiring: false });
    this.onProcess?.({ kind: 'started' });
    void process.exited.then(() => this.#forget(process));
    this.#rebalance();
  }

  #forget(process: SandboxProcess): void {
    if (!this.#slots.delete(process)) return;
    this.onProcess?.({ kind: 'stopped', reason: process.stopReason });
    this.#rebalance();
  }
}
