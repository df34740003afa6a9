import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import type { Readable, Writable } from 'node:stream';
import {
  CancelledError,
  ExecutionFailedError,
  type FleetError,
  fromWireError,
  InternalError,
  isFleetError,
  type ProgressUpdate,
  ResourceLimitError,
} from '@forge-fleet/shared';
import type { Logger } from 'pino';
import { cpuSecondsFromStat, errorForExit, type ProcessExit } from './exit.js';
import { lineReader, Outbox } from './framing.js';
import type { LaunchCommand, SandboxLimits } from './launch.js';
import { LivenessCheck } from './liveness.js';
import { type RunRequest, SandboxReply, type SandboxRequest } from './protocol.js';

/** How much of a process's stderr is kept to explain its death. */
const STDERR_TAIL_BYTES = 8 * 1024;
/** How often a running call's CPU time is read from /proc. */
const CPU_POLL_MS = 100;

/**
 * A call that shared its process with the call that brought the process
 * down (or with others, when the process died and nobody can tell which call
 * did it). It did nothing wrong as far as anyone knows: the pool runs it
 * again alone, which is safe because a sandboxed handler cannot reach
 * anything outside its process.
 */
export class BystanderError extends InternalError {
  constructor(
    readonly tool: string,
    readonly why: FleetError | string,
  ) {
    super(`tool '${tool}' shared a sandbox process that was stopped (${typeof why === 'string' ? why : `${why.code}: ${why.message}`}); it is run again alone`);
  }
}

/** A culprit no run id can match: every call of the killed process is a bystander. */
const UNKNOWN_CULPRIT = '(unknown)';

interface Running {
  readonly request: RunRequest;
  readonly cpuStart: number | undefined;
  readonly resolve: (result: unknown) => void;
  readonly reject: (error: FleetError) => void;
  readonly onProgress: ((update: ProgressUpdate) => void) | undefined;
  readonly cleanups: (() => void)[];
}

/**
 * One sandbox process, as the worker sees it. It may run several calls at
 * once (the pool decides how many): a process per call in flight would cost
 * a process wake-up and two pipe writes per call, which made the sandbox the
 * fleet's bottleneck (bench/README.md). Messages written in the same
 * event-loop turn leave in one write, both ways.
 *
 * When anything goes wrong (a limit, a crash, a handler that ignores
 * cancellation) the process is killed: the call at fault fails with its typed
 * error, the calls sharing the process with EXECUTION_FAILED naming why.
 *
 * CPU time is read per process, so a call's CPU budget is checked as the
 * process's CPU time since that call began: with calls sharing a process this
 * over-counts, never under-counts, and the oldest running call — the one
 * whose budget runs out first — is the one blamed.
 */
export class SandboxProcess {
  readonly #child: ChildProcess;
  readonly #channel: Writable;
  readonly #limits: SandboxLimits;
  readonly #log: Logger;
  #nodePid: number | undefined;
  #stderr = '';
  /** Running calls by run id, oldest first. */
  readonly #running = new Map<string, Running>();
  #runs = 0;
  #exit: ProcessExit | undefined;
  /** Set when the worker killed the process on purpose: the failure it reports to the call at fault. */
  #killedFor: FleetError | undefined;
  /** The call the kill is about; `undefined` when it is about the process (closing, retiring). */
  #culprit: string | undefined;
  #cpuPoll: NodeJS.Timeout | undefined;
  /** The process's CPU seconds at the last reading. */
  #lastCpu: number | undefined;
  /** When (performance.now()) #lastCpu was read. */
  #lastCpuAt = 0;
  readonly #outbox: Outbox;
  /** Watches the event loop while calls run: a loop blocked at zero CPU is seen by nothing else. */
  readonly #liveness: LivenessCheck;
  readonly exited: Promise<ProcessExit>;

  private constructor(child: ChildProcess, limits: SandboxLimits, log: Logger) {
    this.#child = child;
    this.#limits = limits;
    this.#log = log;
    this.#channel = child.stdio[3] as Writable;
    this.#outbox = new Outbox((text) => this.#channel.write(text));
    this.#liveness = new LivenessCheck({
      livenessIntervalMs: limits.livenessIntervalMs,
      livenessTimeoutMs: limits.livenessTimeoutMs,
      ping: (seq) => this.#send({ type: 'ping', seq }),
      // Read afresh: only when a ping goes out and when one is overdue.
      cpuSeconds: () => this.cpuSeconds(),
      onFrozen: (silentMs) => this.#onFrozen(silentMs),
    });
    // A killed process resets its pipes; that is reported through 'exit', and must never crash the worker.
    for (const stream of child.stdio) stream?.on('error', () => undefined);
    child.stderr?.on('data', (chunk: Buffer) => {
      this.#stderr = (this.#stderr + chunk.toString('utf8')).slice(-STDERR_TAIL_BYTES);
    });
    child.stdout?.on('data', (chunk: Buffer) => log.debug({ sandboxPid: child.pid, stdout: chunk.toString('utf8').slice(0, 2000) }, 'sandboxed handler wrote to stdout'));
    this.exited = new Promise((resolve) => {
      child.on('exit', (code, signal) => {
        this.#exit = { code, signal, stderr: this.#stderr };
        this.#onExit(this.#exit);
        resolve(this.#exit);
      });
    });
  }

  /**
   * Starts a process and waits until it has loaded the bundle.
   *
   * @throws InternalError when it cannot start or dies before it is ready.
   */
  static async start(command: LaunchCommand, limits: SandboxLimits, log: Logger, startTimeoutMs = 15_000): Promise<{ process: SandboxProcess; tools: string[] }> {
    // An empty environment: nothing of the worker's (REDIS_URL, secrets, PATH) reaches a handler.
    // `detached`: a session and process group of its own (setsid), so kill(0) or kill(-pgid) from inside reaches
    // only the sandbox, never the worker's group (under `npm start`, every fleet process). Death with the worker
    // comes from bubblewrap's --die-with-parent or setpriv's --pdeathsig (launch.ts), not from the group.
    const child = spawn(command.file, command.args, { env: {}, stdio: ['ignore', 'pipe', 'pipe', 'pipe'], detached: true });
    const sandbox = new SandboxProcess(child, limits, log);
    const tools = await new Promise<string[]>((resolve, reject) => {
      const timer = setTimeout(() => {
        sandbox.kill(new InternalError(`a sandbox process did not become ready within ${startTimeoutMs} ms`));
        reject(new InternalError(`a sandbox process did not become ready within ${startTimeoutMs} ms; the machine may be overloaded`));
      }, startTimeoutMs);
      child.on('error', (error) => {
        clearTimeout(timer);
        reject(new InternalError(`cannot start a sandbox process (${command.file}): ${error.message}`, { cause: error }));
      });
      void sandbox.exited.then((exit) => {
        clearTimeout(timer);
        reject(new InternalError(`a sandbox process exited before it was ready (code ${exit.code}, signal ${exit.signal}): ${exit.stderr.trim().slice(-1000)}`));
      });
      sandbox.#lines((reply) => {
        if (reply.type !== 'ready') return;
        clearTimeout(timer);
        resolve(reply.tools);
      });
    });
    sandbox.#nodePid = findNodePid(child.pid);
    return { process: sandbox, tools };
  }

  get pid(): number | undefined {
    return this.#child.pid;
  }

  /** Why the process ended, for metrics: the code it was killed for (lower case), or `exited` when it died by itself. */
  get stopReason(): string {
    return this.#killedFor?.code.toLowerCase() ?? 'exited';
  }

  get alive(): boolean {
    return this.#exit === undefined && this.#killedFor === undefined;
  }

  /** Calls running in this process now. */
  get load(): number {
    return this.#running.size;
  }

  /** CPU seconds as of the last reading (at most a poll interval old while calls run): cheap, for bookkeeping. */
  get recentCpuSeconds(): number | undefined {
    return this.#lastCpu ?? this.cpuSeconds();
  }

  /** CPU time this process has used so far, in seconds; undefined where /proc cannot tell. */
  cpuSeconds(): number | undefined {
    if (this.#nodePid === undefined) return undefined;
    try {
      return cpuSecondsFromStat(readFileSync(`/proc/${this.#nodePid}/stat`, 'utf8'));
    } catch {
      return undefined;
    }
  }

  #readCpu(): void {
    this.#lastCpu = this.cpuSeconds();
    this.#lastCpuAt = performance.now();
  }

  /**
   * Runs one call. Resolves with the handler's ToolResult (unchecked: the
   * caller validates it); rejects with a FleetError. When `signal` fires, the
   * handler's own signal fires too; a handler still running `cancelGraceMs`
   * later has its process killed.
   */
  run(call: Omit<RunRequest, 'runId'>, signal: AbortSignal, cancelGraceMs: number, onProgress?: (update: ProgressUpdate) => void): Promise<unknown> {
    if (!this.alive) return Promise.reject(new InternalError('a sandbox process was handed a call while dead; this is a bug in the sandbox pool'));
    const request: RunRequest = { ...call, runId: String(++this.#runs) };
    return new Promise((resolve, reject) => {
      // The CPU reading of the last poll or start, if at most CPU_POLL_MS old (so it can only over-count a call's
      // CPU, by at most what the process used in that time), saves a /proc read per call. Under load a process
      // often runs dry between two batches of calls: without the age check each batch cost a /proc read.
      if (this.#running.size === 0 && (this.#lastCpu === undefined || performance.now() - this.#lastCpuAt > CPU_POLL_MS)) this.#readCpu();
      const running: Running = { request, cpuStart: this.#lastCpu, resolve, reject, onProgress, cleanups: [] };
      this.#running.set(request.runId, running);
      if (running.cpuStart !== undefined) this.#cpuPoll ??= setInterval(() => this.#checkCpu(), CPU_POLL_MS);
      this.#liveness.start();
      const onAbort = (): void => {
        if (this.#running.get(request.runId) !== running) return;
        this.#send({ type: 'cancel', runId: request.runId, reason: reasonOf(signal.reason) });
        const grace = setTimeout(() => {
          if (this.#running.get(request.runId) !== running) return;
          this.kill(isFleetError(signal.reason) ? signal.reason : new CancelledError(request.tool, reasonOf(signal.reason)), request.runId);
        }, cancelGraceMs);
        running.cleanups.push(() => clearTimeout(grace));
      };
      // The run goes first, so a cancellation always finds its handler in the sandbox.
      this.#send(request);
      if (signal.aborted) onAbort();
      else signal.addEventListener('abort', onAbort, { once: true });
      running.cleanups.push(() => signal.removeEventListener('abort', onAbort));
    });
  }

  /**
   * Kills the process (and its namespace). The run `culprit` fails with
   * `reason` and the others as bystanders (all of them, with
   * {@link UNKNOWN_CULPRIT}). Without a culprit — the pool closing, a process
   * retired — every running call fails with `reason`.
   */
  kill(reason: FleetError, culprit?: string): void {
    if (this.#exit !== undefined) return;
    if (this.#killedFor === undefined) {
      this.#killedFor = reason;
      this.#culprit = culprit;
    }
    // unshare --kill-child takes the sandboxed node down with it.
    this.#child.kill('SIGKILL');
  }

  /**
   * Kills the process once the oldest running call's budget is spent, counted
   * as the process's CPU time since that call began. Alone, that call is the
   * culprit; sharing, nobody can tell who used the CPU, so there is none: the
   * pool re-runs every call of the process alone, and the one at fault meets
   * the limit again by itself.
   */
  #checkCpu(): void {
    this.#readCpu();
    const oldest = this.#running.values().next().value;
    if (oldest?.cpuStart === undefined || this.#lastCpu === undefined) return;
    const used = this.#lastCpu - oldest.cpuStart;
    if (used > this.#limits.cpuSeconds) {
      const reason = new ResourceLimitError(oldest.request.tool, 'cpu', `the call used more than ${this.#limits.cpuSeconds} s of CPU time`);
      this.kill(reason, this.#running.size === 1 ? oldest.request.runId : UNKNOWN_CULPRIT);
    }
  }

  /**
   * The event loop answered no ping while the process used next to no CPU.
   * Alone, the call running is the one that froze it and fails now; sharing,
   * nobody can tell which call did, so every call is a bystander and runs
   * again alone, where the one at fault freezes its own process. Either way
   * the process is killed: nothing more is sent to it and the pool replaces it.
   */
  #onFrozen(silentMs: number): void {
    const oldest = this.#running.values().next().value;
    if (oldest === undefined) return;
    this.#log.warn({ sandboxPid: this.#child.pid, silentMs, calls: this.#running.size }, 'a sandbox process stopped answering while using no CPU; replacing it');
    const reason = new ResourceLimitError(
      oldest.request.tool,
      'event-loop',
      `its sandbox process answered no liveness check for ${silentMs} ms while using next to no CPU (a blocking wait such as Atomics.wait); the process was replaced — keep handlers from blocking the event loop`,
    );
    this.kill(reason, this.#running.size === 1 ? oldest.request.runId : UNKNOWN_CULPRIT);
  }

  #send(message: SandboxRequest): void {
    // Everything sent in this turn leaves in one write.
    this.#outbox.send(JSON.stringify(message));
  }

  #lines(onReply: (reply: SandboxReply) => void): void {
    const input = this.#child.stdio[3] as Readable;
    let pending = 0;
    const read = lineReader((line) => {
      const reply = replyOf(line);
      if (reply === undefined) {
        this.kill(new ExecutionFailedError(this.#oldestTool(), 'its sandbox process sent a malformed reply and was replaced'));
        return;
      }
      onReply(reply);
      if (reply.type === 'pong') this.#liveness.pong(reply.seq);
      else if (reply.type !== 'ready') this.#onReply(reply);
    });
    input.on('data', (chunk: Buffer) => {
      // A reply without a newline must not grow without bound; the runtime itself keeps results under outputBytes.
      const newline = chunk.lastIndexOf(10);
      pending = newline === -1 ? pending + chunk.length : chunk.length - newline - 1;
      if (pending > this.#limits.outputBytes + 64 * 1024) {
        this.kill(new ResourceLimitError(this.#oldestTool(), 'output', `a reply passed ${this.#limits.outputBytes} bytes`));
      }
      read(chunk);
    });
  }

  #oldestTool(): string {
    return this.#running.values().next().value?.request.tool ?? 'unknown';
  }

  #onReply(reply: Exclude<SandboxReply, { type: 'ready' | 'pong' }>): void {
    const running = this.#running.get(reply.runId);
    // A late reply for a call that already ended (killed, or answered) has no one to go to.
    if (running === undefined) return;
    if (reply.type === 'progress') {
      const { progress, total, message } = reply;
      running.onProgress?.({ progress, total, message });
      return;
    }
    this.#end(running);
    const tool = running.request.tool;
    switch (reply.type) {
      case 'result':
        return running.resolve(reply.result);
      case 'fleet-error':
        return running.reject(fromWireError(reply.error));
      case 'thrown':
        return running.reject(new ExecutionFailedError(tool, reply.reason));
      case 'limit':
        return running.reject(new ResourceLimitError(tool, reply.limit, reply.detail));
    }
  }

  #onExit(exit: ProcessExit): void {
    clearInterval(this.#cpuPoll);
    this.#liveness.stop();
    if (this.#running.size === 0) {
      if (this.#killedFor === undefined) this.#log.warn({ sandboxPid: this.#child.pid, code: exit.code, signal: exit.signal, stderr: exit.stderr.slice(-500) }, 'an idle sandbox process died');
      return;
    }
    const killedFor = this.#killedFor;
    const culprit = this.#culprit;
    const alone = this.#running.size === 1;
    for (const running of [...this.#running.values()]) {
      this.#end(running);
      const { tool, runId } = running.request;
      if (killedFor !== undefined && (culprit === runId || culprit === undefined)) running.reject(killedFor);
      else if (alone) running.reject(killedFor ?? errorForExit(tool, exit, this.#limits.memoryMb));
      // Shared, with the culprit elsewhere or unknown: the others are bystanders.
      else running.reject(new BystanderError(tool, killedFor ?? `the process exited (code ${exit.code}, signal ${exit.signal})`));
    }
  }

  #end(running: Running): void {
    for (const cleanup of running.cleanups) cleanup();
    this.#running.delete(running.request.runId);
    if (this.#running.size === 0) {
      clearInterval(this.#cpuPoll);
      this.#cpuPoll = undefined;
      this.#liveness.stop();
    }
  }
}

function reasonOf(reason: unknown): string {
  return reason instanceof Error ? reason.message : String(reason);
}

/**
 * The sandboxed Node process, whose CPU time is read: the last of the chain
 * the worker spawned (`unshare --fork` runs node as its child; bubblewrap
 * runs an init of its own and node below it), each link with one child.
 */
function findNodePid(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    let current = pid;
    for (;;) {
      const children = readFileSync(`/proc/${current}/task/${current}/children`, 'utf8').trim().split(/\s+/).filter(Boolean);
      if (children.length !== 1) return current;
      current = Number(children[0]);
    }
  } catch {
    return undefined;
  }
}

/**
 * A reply line, checked: the sandbox is untrusted. A result (nearly every
 * line under load) has a shape simple enough to check by hand — its `result`
 * is checked against ToolResult by runExecutor anyway — and skips the schema's
 * copy of the object; everything else goes through {@link SandboxReply}.
 * Undefined when the line is not a valid reply.
 */
function replyOf(line: string): SandboxReply | undefined {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return undefined;
  }
  if (typeof value === 'object' && value !== null && (value as { type?: unknown }).type === 'result') {
    const { runId, result } = value as { runId?: unknown; result?: unknown };
    return typeof runId === 'string' && 'result' in value ? { type: 'result', runId, result } : undefined;
  }
  const parsed = SandboxReply.safeParse(value);
  return parsed.success ? parsed.data : undefined;
}
