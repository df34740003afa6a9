import { availableParallelism } from 'node:os';
import type { WASI } from 'node:wasi';
import { Worker } from 'node:worker_threads';
import { RUNNER_SOURCE, THREAD_SOURCE } from './runner-source.js';
import type { WasmModule } from './wasm-api.js';

/** One call as the runner sees it. */
export interface WasmRequest {
  /** Compiled once, posted to the thread (modules are structured-cloneable; the thread does not recompile). */
  readonly module: WasmModule;
  /** Bytes the program reads on standard input. */
  readonly input: Uint8Array;
  /** `argv[0]` of the program. */
  readonly name: string;
  /** Cap on stdout + stderr together. */
  readonly outputBytes: number;
}

/** How a call ended inside the runner. */
export type WasmReply =
  | { readonly kind: 'exit'; readonly code: number; readonly stdout: Uint8Array; readonly stderr: Uint8Array; readonly memoryBytes: number }
  | { readonly kind: 'trap' | 'range-error'; readonly message: string; readonly stdout: Uint8Array; readonly stderr: Uint8Array; readonly memoryBytes: number }
  | { readonly kind: 'output-limit'; readonly stdout: Uint8Array; readonly stderr: Uint8Array; readonly memoryBytes: number }
  /** The thread itself died: its JavaScript heap limit (`resourceLimits`) or a crash. */
  | { readonly kind: 'thread-died'; readonly outOfMemory: boolean; readonly message: string }
  /** The deadline passed or the signal fired: the thread was terminated. */
  | { readonly kind: 'stopped'; readonly reason: unknown };

/** What the runner could enforce in this process. */
export interface WasmEnforcement {
  /** `thread`: each call runs in a worker thread that is terminated on deadline or cancel. `none` (`threads: false`): the call runs on the caller's thread and an infinite loop blocks it. */
  readonly deadline: 'thread' | 'none';
}

export interface WasmRunnerOptions {
  /** Warm threads kept. @defaultValue `min(availableParallelism(), 4)` */
  readonly size?: number;
  /** Run calls in worker threads. `false` runs them on the calling thread, with no deadline: for measurements only. @defaultValue true */
  readonly threads?: boolean;
  /** JavaScript heap of each thread (`resourceLimits.maxOldGenerationSizeMb`); WebAssembly memories are capped by their own maximum. @defaultValue 32 */
  readonly threadHeapMb?: number;
}

interface Slot {
  readonly worker: Worker;
  busy: ((reply: WasmReply) => void) | undefined;
  stderrTail: string;
}

// The warning node:wasi prints on first use. Filtered per thread: a fleet process must print no warnings.
const THREAD_ARGV = ['--disable-warning=ExperimentalWarning'];

/** True where Node's permission model forbids worker threads (inside the process sandbox). */
export function threadsForbidden(): boolean {
  const permission = (process as { permission?: { has(scope: string): boolean } }).permission;
  return permission !== undefined && !permission.has('worker');
}

/**
 * Runs WASI programs in a small pool of warm worker threads, one call per
 * thread at a time. A call that passes its deadline or whose signal fires has
 * its thread terminated (that stops even `(loop br 0)`) and replaced.
 */
export class WasmRunner {
  readonly enforcement: WasmEnforcement;
  readonly #size: number;
  readonly #threadHeapMb: number;
  readonly #idle: Slot[] = [];
  readonly #all = new Set<Slot>();
  readonly #waiting: ((slot: Slot) => void)[] = [];
  #closed = false;
  #inline: ((wasi: typeof WASI, request: WasmRequest) => WasmReply) | undefined;

  constructor(options: WasmRunnerOptions = {}) {
    this.#size = Math.max(1, options.size ?? Math.min(availableParallelism(), 4));
    this.#threadHeapMb = options.threadHeapMb ?? 32;
    this.enforcement = { deadline: options.threads === false ? 'none' : 'thread' };
  }

  /** Threads started and alive. */
  get threads(): number {
    return this.#all.size;
  }

  /**
   * Runs one call. Never rejects: every ending is a {@link WasmReply}.
   * @param deadlineMs wall-clock limit; the thread is terminated when it passes.
   */
  async run(request: WasmRequest, signal: AbortSignal | undefined, deadlineMs: number): Promise<WasmReply> {
    if (signal?.aborted) return { kind: 'stopped', reason: signal.reason };
    if (this.#closed) return { kind: 'thread-died', outOfMemory: false, message: 'the WebAssembly runner is closed' };
    if (this.enforcement.deadline === 'none') return this.#runInline(request);
    const slot = await this.#acquire(signal);
    if (slot === undefined) return { kind: 'stopped', reason: signal?.reason };
    return new Promise<WasmReply>((resolve) => {
      let done = false;
      const finish = (reply: WasmReply, healthy: boolean): void => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        slot.busy = undefined;
        if (healthy) this.#release(slot);
        else this.#discard(slot);
        resolve(reply);
      };
      const onAbort = (): void => finish({ kind: 'stopped', reason: signal?.reason }, false);
      const timer = setTimeout(() => finish({ kind: 'stopped', reason: 'deadline' }, false), deadlineMs);
      signal?.addEventListener('abort', onAbort, { once: true });
      slot.busy = (reply) => finish(reply, reply.kind !== 'thread-died');
      slot.worker.ref();
      slot.worker.postMessage({ ...request, id: 0 });
    });
  }

  /** Terminates every thread; later calls fail with `thread-died`. */
  async close(): Promise<void> {
    this.#closed = true;
    const slots = [...this.#all];
    this.#all.clear();
    this.#idle.length = 0;
    await Promise.all(slots.map((s) => s.worker.terminate()));
  }

  async #runInline(request: WasmRequest): Promise<WasmReply> {
    // Loaded only here: importing node:wasi prints an ExperimentalWarning in processes that do not silence it.
    const { WASI } = await import('node:wasi');
    // Same code as the threads run, evaluated here because this process may not start threads.
    // eslint-disable-next-line @typescript-eslint/no-implied-eval -- a constant of this package, not input
    this.#inline ??= new Function('WASI', 'request', `${RUNNER_SOURCE}\nreturn runCall(WASI, request);`) as (wasi: typeof WASI, request: WasmRequest) => WasmReply;
    return this.#inline(WASI, request);
  }

  async #acquire(signal: AbortSignal | undefined): Promise<Slot | undefined> {
    const idle = this.#idle.pop();
    if (idle !== undefined) return idle;
    if (this.#all.size < this.#size) return this.#spawn();
    return new Promise<Slot | undefined>((resolve) => {
      const onAbort = (): void => {
        const i = this.#waiting.indexOf(take);
        if (i >= 0) this.#waiting.splice(i, 1);
        resolve(undefined);
      };
      const take = (slot: Slot): void => {
        signal?.removeEventListener('abort', onAbort);
        resolve(slot);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#waiting.push(take);
    });
  }

  #spawn(): Slot {
    const worker = new Worker(THREAD_SOURCE, {
      eval: true,
      execArgv: THREAD_ARGV,
      env: {},
      // Nothing the thread prints reaches this process's stdio; the tail explains a crash.
      stdout: true,
      stderr: true,
      resourceLimits: { maxOldGenerationSizeMb: this.#threadHeapMb, maxYoungGenerationSizeMb: 8 },
    });
    const slot: Slot = { worker, busy: undefined, stderrTail: '' };
    worker.stdout.resume();
    worker.stderr.setEncoding('utf8');
    worker.stderr.on('data', (chunk: string) => (slot.stderrTail = (slot.stderrTail + chunk).slice(-4096)));
    worker.on('message', (reply: WasmReply) => slot.busy?.(reply));
    worker.on('error', (error: Error & { code?: string }) => {
      slot.busy?.({ kind: 'thread-died', outOfMemory: error.code === 'ERR_WORKER_OUT_OF_MEMORY', message: error.message });
    });
    worker.on('exit', (code) => {
      slot.busy?.({ kind: 'thread-died', outOfMemory: false, message: `the thread exited with code ${code}${slot.stderrTail === '' ? '' : `: ${slot.stderrTail.trim().split('\n').at(-1) ?? ''}`}` });
      this.#discard(slot);
    });
    this.#all.add(slot);
    return slot;
  }

  #release(slot: Slot): void {
    if (!this.#all.has(slot)) return;
    const next = this.#waiting.shift();
    if (next !== undefined) {
      next(slot);
      return;
    }
    slot.worker.unref();
    this.#idle.push(slot);
  }

  #discard(slot: Slot): void {
    const known = this.#all.delete(slot);
    const i = this.#idle.indexOf(slot);
    if (i >= 0) this.#idle.splice(i, 1);
    void slot.worker.terminate();
    // A caller waiting for a thread gets a fresh one in place of this.
    if (known && !this.#closed) {
      const next = this.#waiting.shift();
      if (next !== undefined) next(this.#spawn());
    }
  }
}
