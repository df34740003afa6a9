import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  CancelledError,
  defineTool,
  InvalidDefinitionError,
  ExecutionFailedError,
  ExecutionTimeoutError,
  isFleetError,
  resultFromOutput,
  ResourceLimitError,
  type Tool,
  type ToolCall,
  type ToolContext,
  type ToolDefinitionInput,
  type ToolExecutor,
  type ToolResult,
} from '@forge-fleet/shared';
import { inspectMemory, memoryProblem, WASM_PAGE_BYTES } from './inspect.js';
import { threadsForbidden, WasmRunner, type WasmReply } from './runner.js';
import { type WasmModule, wasmApi } from './wasm-api.js';

/** @defaultValue of {@link WasmToolSpec.memoryLimitMb} */
export const DEFAULT_WASM_MEMORY_MB = 64;
/** @defaultValue of {@link WasmToolSpec.timeoutMs} */
export const DEFAULT_WASM_TIMEOUT_MS = 10_000;
/** @defaultValue of {@link WasmToolSpec.outputBytes} */
export const DEFAULT_WASM_OUTPUT_BYTES = 1 << 20;

/** A WebAssembly tool: the definition fields of {@link defineTool} (tier is always `embedded`) plus the module and its limits. */
export interface WasmToolSpec extends Omit<ToolDefinitionInput, 'tier' | 'pool' | 'timeoutMs'> {
  /** The WASI preview 1 program: a path or `file:` URL of a `.wasm` file (read and compiled at the first call, then cached), or its bytes. */
  readonly wasm: string | URL | Uint8Array;
  /** Cap on the module's linear memory. Modules whose memory has no maximum, or one above this, are refused. @defaultValue 64 */
  readonly memoryLimitMb?: number;
  /** Wall-clock deadline of one call; the thread running it is terminated when it passes. @defaultValue 10000 */
  readonly timeoutMs?: number;
  /** Cap on what one call writes to stdout and stderr together. @defaultValue 1 MiB */
  readonly outputBytes?: number;
  /** Threads that run the calls. @defaultValue a runner shared by every WASM tool of the process */
  readonly runner?: WasmRunner;
}

let sharedRunner: WasmRunner | undefined;
/** The runner WASM tools share unless given their own; created at first use. */
export function sharedWasmRunner(): WasmRunner {
  sharedRunner ??= new WasmRunner();
  return sharedRunner;
}

// Compiled modules by file, for every tool of the process: compiling is the expensive step, instantiating is not.

const compiledFiles = new Map<string, Promise<{ module: WasmModule; bytes: Uint8Array }>>();

function compile(source: string | URL | Uint8Array): Promise<{ module: WasmModule; bytes: Uint8Array }> {
  if (source instanceof Uint8Array) return wasmApi.compile(source).then((module) => ({ module, bytes: source }));
  const path = resolve(source instanceof URL ? fileURLToPath(source) : source);
  let entry = compiledFiles.get(path);
  if (entry === undefined) {
    entry = readFile(path).then(async (buffer) => {
      const bytes = new Uint8Array(buffer);
      return { module: await wasmApi.compile(bytes), bytes };
    });
    // A failed read is not cached: the file may appear later (a build still running).
    entry.catch(() => compiledFiles.delete(path));
    compiledFiles.set(path, entry);
  }
  return entry;
}

function lastLine(bytes: Uint8Array): string {
  const text = new TextDecoder().decode(bytes).trim();
  return text.split('\n').at(-1) ?? '';
}

/**
 * Runs a WASI preview 1 program per call: the call's arguments arrive as JSON
 * on stdin, stdout is the result (a JSON object or any text), exit code 0 is
 * success. Each call gets a fresh instance of a module compiled once.
 */
export class WasmToolExecutor implements ToolExecutor {
  readonly #source: string | URL | Uint8Array;
  readonly #capPages: number;
  readonly #timeoutMs: number;
  readonly #outputBytes: number;
  readonly #runner: WasmRunner | undefined;
  #module: Promise<WasmModule> | undefined;
  /** The module's declared memory maximum once it is loaded, when it is above its initial size. */
  #maxBytes = Number.POSITIVE_INFINITY;

  constructor(
    readonly name: string,
    options: { wasm: string | URL | Uint8Array; memoryLimitMb: number; timeoutMs: number; outputBytes: number; runner?: WasmRunner | undefined },
  ) {
    this.#source = options.wasm;
    this.#capPages = Math.floor((options.memoryLimitMb * 2 ** 20) / WASM_PAGE_BYTES);
    this.#timeoutMs = options.timeoutMs;
    this.#outputBytes = options.outputBytes;
    this.#runner = options.runner;
  }

  /** The runner's threads; the process-wide one unless the tool was given its own. */
  get runner(): WasmRunner {
    return this.#runner ?? sharedWasmRunner();
  }

  /**
   * Reads, checks and compiles the module (once; later calls reuse it).
   * @throws ExecutionFailedError when the file cannot be read, does not compile, or breaks the memory or WASI rules.
   */
  prepare(): Promise<WasmModule> {
    this.#module ??= this.#load();
    return this.#module;
  }

  async #load(): Promise<WasmModule> {
    try {
      const { module, bytes } = await compile(this.#source);
      const layout = inspectMemory(bytes);
      const problem = memoryProblem(layout, this.#capPages) ?? this.#wasiProblem(module);
      if (problem !== undefined) throw new Error(problem);
      const memory = layout.defined[0];
      // Only a memory that can grow can be blown up; one fixed at its size never reaches "the limit".
      if (memory !== undefined && memory.maxPages !== undefined && memory.maxPages > memory.minPages) this.#maxBytes = memory.maxPages * WASM_PAGE_BYTES;
      return module;
    } catch (error) {
      // A refused or unreadable module stays refused for this executor; the file cache never holds it.
      throw new ExecutionFailedError(this.name, `its WebAssembly module cannot run: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
    }
  }

  #wasiProblem(module: WasmModule): string | undefined {
    const exports = wasmApi.Module.exports(module);
    if (!exports.some((e) => e.name === '_start' && e.kind === 'function')) return 'it exports no "_start" function (a WASI command is expected)';
    if (!exports.some((e) => e.name === 'memory' && e.kind === 'memory')) return 'it does not export its memory as "memory"';
    const foreign = wasmApi.Module.imports(module).find((i) => i.module !== 'wasi_snapshot_preview1');
    if (foreign !== undefined) return `it imports ${foreign.module}.${foreign.name}; only wasi_snapshot_preview1 is provided`;
    return undefined;
  }

  async execute(call: ToolCall, ctx: ToolContext): Promise<ToolResult> {
    const module = await this.prepare();
    if (threadsForbidden()) {
      // Measured on Node 20.20: under --experimental-permission, node:wasi throws "Access to this API has been restricted" and threads are denied.
      throw new ExecutionFailedError(
        this.name,
        'WebAssembly tools cannot run inside the process sandbox: Node\'s permission model forbids node:wasi and worker threads there; serve this tool with its WasmToolExecutor in the worker process (see docs/wasm.md)',
      );
    }
    const runner = this.runner;
    const input = new TextEncoder().encode(JSON.stringify(call.arguments));
    const reply = await runner.run({ module, input, name: this.name, outputBytes: this.#outputBytes }, ctx.signal, this.#timeoutMs);
    return this.#resultOf(call, reply);
  }

  #resultOf(call: ToolCall, reply: WasmReply): ToolResult {
    switch (reply.kind) {
      case 'stopped': {
        const reason: unknown = reply.reason;
        if (isFleetError(reason)) throw reason;
        if (reason === 'deadline') throw new ExecutionTimeoutError(this.name, this.#timeoutMs);
        throw new CancelledError(this.name, reason instanceof Error ? reason.message : typeof reason === 'string' ? reason : 'aborted');
      }
      case 'thread-died':
        if (reply.outOfMemory) throw new ResourceLimitError(this.name, 'memory', reply.message);
        throw new ExecutionFailedError(this.name, reply.message);
      case 'output-limit':
        throw new ResourceLimitError(this.name, 'output', `stdout and stderr passed ${this.#outputBytes} bytes`);
      case 'range-error':
        throw new ResourceLimitError(this.name, 'memory', reply.message);
      case 'trap':
      case 'exit': {
        const atMax = reply.memoryBytes >= this.#maxBytes;
        const code = reply.kind === 'exit' ? reply.code : undefined;
        const failed = code !== 0;
        if (failed && atMax) throw new ResourceLimitError(this.name, 'memory', `the module's memory reached its maximum of ${reply.memoryBytes} bytes and the program failed`);
        if (reply.kind === 'trap') throw new ExecutionFailedError(this.name, `the WebAssembly program trapped (${reply.message})${stderrSuffix(reply.stderr)}`);
        if (code !== 0) throw new ExecutionFailedError(this.name, `the WebAssembly program exited with code ${String(code)}${stderrSuffix(reply.stderr)}`);
        const text = new TextDecoder().decode(reply.stdout);
        return resultFromOutput(call, parseOutput(text));
      }
    }
  }
}

function stderrSuffix(stderr: Uint8Array): string {
  const line = lastLine(stderr);
  return line === '' ? '' : `: ${line}`;
}

/** A JSON object or array on stdout is structured output; anything else is text. */
function parseOutput(text: string): string | Record<string, unknown> | unknown[] {
  const trimmed = text.trim();
  if (trimmed.startsWith('{') || trimmed.startsWith('[')) {
    try {
      return JSON.parse(trimmed) as Record<string, unknown> | unknown[];
    } catch {
      return text;
    }
  }
  return text;
}

/**
 * Declares an Embedded-tier tool implemented by a WASI preview 1 program.
 *
 * @example
 * export default [
 *   defineWasmTool({
 *     name: 'word_count',
 *     description: 'Counts the words of a text.',
 *     parameters: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
 *     wasm: new URL('./dist/wasm/word_count.wasm', import.meta.url),
 *     memoryLimitMb: 16,
 *   }),
 * ];
 *
 * @throws InvalidDefinitionError / RegistryError as {@link defineTool} does.
 */
export function defineWasmTool(spec: WasmToolSpec): Tool {
  const { wasm, memoryLimitMb = DEFAULT_WASM_MEMORY_MB, timeoutMs = DEFAULT_WASM_TIMEOUT_MS, outputBytes = DEFAULT_WASM_OUTPUT_BYTES, runner, ...definition } = spec;
  for (const [field, value] of [['memoryLimitMb', memoryLimitMb], ['timeoutMs', timeoutMs], ['outputBytes', outputBytes]] as const) {
    if (!Number.isInteger(value) || value <= 0) throw new InvalidDefinitionError({ toolName: definition.name, path: `/${field}`, reason: `must be a positive integer, got ${value}` });
  }
  const executor = new WasmToolExecutor(definition.name, { wasm, memoryLimitMb, timeoutMs, outputBytes, runner });
  // The definition carries the deadline too, so runExecutor and the dispatcher see the same one.
  return defineTool({ ...definition, tier: 'embedded', timeoutMs, executor });
}
