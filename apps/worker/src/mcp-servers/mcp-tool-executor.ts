import { type BlocksResult, blocksResult, ExecutionFailedError, isFleetError, McpServerLostError, type ToolCall, type ToolContext, type ToolExecutor, type ToolResult, toWireError, UnavailableError } from '@forge-fleet/shared';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { Logger } from 'pino';
import { kindOf } from './answer-lines.js';
import { BIND_CALLER, type CallerBoundExecutor } from '../tools/caller-executor.js';
import { CALLER_SESSION, type CallerSessionExecutor, type CallerSessionSource } from '../tools/caller-session.js';
import { RESERVE_SLOT, type ReservedRun, SLOTS_FULL, type SlotReservingExecutor } from '../tools/slot-reserve.js';
import type { McpPoolCall, McpPoolSlot, McpServerPool } from './server-pool.js';
import { isSessionExpired, SessionExpiredError } from './session-expired.js';

/** What a fleet tool needs to know of the server tool behind it. */
export interface McpToolTarget {
  /** The server's name in the servers file. */
  readonly server: string;
  /** The tool's name as the server lists it (without the prefix). */
  readonly tool: string;
  /** How long one call may run, when the definition gives no `timeoutMs`: the pool's own default. */
  readonly timeoutMs: number | undefined;
  /** Whether the server requires the tool to be called as a task (`execution.taskSupport: "required"`). */
  readonly asTask?: boolean;
}

/**
 * Runs a fleet tool as a `tools/call` on its MCP server's pool, after the
 * whole pipeline (scope, schema, approval, signature) let it through.
 *
 * The call's signal is the pool call's signal: a fleet cancel or the tool's
 * timeout sends the server `notifications/cancelled`. The server's
 * `notifications/progress` become the call's progress. Its result comes back
 * as the server gave it: every content block in `blocks`, the text blocks'
 * text as `content`, and `structuredContent`.
 *
 * Binds the caller (see caller-executor.ts): a `perCaller` server keeps each
 * caller's calls on an instance of that caller's. Reserves a slot on the pool
 * before the call's start step (see slot-reserve.ts), so a call waits for an
 * instance while it is still `queued`.
 */
export class McpToolExecutor implements CallerBoundExecutor, SlotReservingExecutor, CallerSessionExecutor {
  constructor(
    /** The fleet's name of the tool (`prefix.tool`). */
    readonly name: string,
    private readonly target: McpToolTarget,
    private readonly pool: McpServerPool,
    private readonly log: Pick<Logger, 'warn'>,
    private readonly caller: string | undefined = undefined,
    /** A slot reserved for the one call this executor runs. */
    private readonly slot: McpPoolSlot | undefined = undefined,
  ) {}

  /** Whether the server tool is called as a task: part of what a listing decides, beside the definition. */
  get asTask(): boolean {
    return this.target.asTask === true;
  }

  [BIND_CALLER](caller: string | undefined): ToolExecutor {
    return caller === this.caller ? this : new McpToolExecutor(this.name, this.target, this.pool, this.log, caller);
  }

  /** A `perCaller` server's sessions on this worker: one worker of several holds each caller's (see caller-session.ts). */
  get [CALLER_SESSION](): CallerSessionSource | undefined {
    const { pool } = this;
    if (pool.options.session !== 'perCaller') return undefined;
    return { server: this.target.server, holds: (caller) => pool.holdsSession(caller), callers: () => pool.sessionCallers(), giveUp: (caller) => pool.giveUpSession(caller) };
  }

  [SLOTS_FULL](caller: string | undefined, waiting = false): boolean {
    return this.pool.isFull(this.pool.options.session === 'perCaller' ? (caller ?? '') : undefined, waiting);
  }

  async [RESERVE_SLOT](caller: string | undefined, onCancellable: (cancel: (reason: unknown) => void) => void): Promise<ReservedRun> {
    // The session a call runs in is the one its slot was reserved on: anonymous callers share the one named for no one.
    const slot = await this.pool.reserve(this.pool.options.session === 'perCaller' ? (caller ?? '') : undefined, this.name, onCancellable);
    return { executor: new McpToolExecutor(this.name, this.target, this.pool, this.log, caller, slot), release: () => slot.release() };
  }

  async execute(call: ToolCall, ctx: ToolContext): Promise<ToolResult> {
    const { server, tool } = this.target;
    const request: McpPoolCall = {
      tool,
      arguments: call.arguments,
      // A session per caller needs one; anonymous (dev-mode) callers share the session named for no one.
      ...(this.pool.options.session === 'perCaller' ? { caller: this.caller ?? '' } : {}),
      signal: ctx.signal,
      onProgress: (p) => {
        try {
          ctx.progress({ progress: p.progress, total: p.total, message: p.message });
        } catch (err) {
          // The server's report, not the fleet's bug: a malformed one is dropped, the call goes on.
          this.log.warn({ err, server, tool }, 'MCP server sent a malformed progress notification; dropped');
        }
      },
      ...(this.target.timeoutMs === undefined ? {} : { timeoutMs: this.target.timeoutMs }),
      ...(this.target.asTask === true ? { asTask: true } : {}),
      label: this.name,
    };
    let raw: CallToolResult;
    try {
      raw = await this.pool.call(request, this.slot);
    } catch (err) {
      // A call the upstream answered 404 to its ended session did not run (MCP Streamable HTTP): it is sent once more,
      // on a new session (in perCaller mode the caller's new one; the slot reserved on the ended session went with it).
      // No other failure is sent again: a call that may have run must not run twice.
      if (!isSessionExpired(err)) throw this.#forCaller(err);
      try {
        raw = await this.pool.call(request);
      } catch (again) {
        throw this.#forCaller(again);
      }
    }
    return resultOf(call, raw, server);
  }

  /**
   * What the caller is told of a failure. A server's stderr is for the
   * operator (it is logged with the instance's exit), never for callers: it
   * may hold anything the server prints, its environment included. A lost
   * instance of a `perCaller` server was the caller's session: the caller is
   * told that it ended, so that it does not take its next call's fresh
   * instance for the state it built up.
   */
  #forCaller(err: unknown): unknown {
    // A second 404 to a new session: the call did not run there either, and its message says so.
    if (isSessionExpired(err)) return new SessionExpiredError(this.name, err.server, err.instance, { cause: err });
    if (err instanceof McpServerLostError) {
      // An answer that broke off on its way ended no instance: a perCaller caller's session goes on.
      if (err.answerCut !== undefined) return new McpServerLostError(this.name, err.server, err.instance, { cause: err, answerCut: err.answerCut });
      return new McpServerLostError(this.name, err.server, err.instance, { cause: err, ...(this.pool.options.session === 'perCaller' ? { session: 'ended' as const } : {}) });
    }
    if (err instanceof UnavailableError) return new UnavailableError(`its MCP server '${this.target.server}' is not running`, { what: `tool '${this.name}'`, cause: err });
    if (isFleetError(err)) return err;
    return new ExecutionFailedError(this.name, `MCP server '${this.target.server}' failed the call`, { cause: err });
  }
}

/** `{ type: 'text', text }` and nothing else. */
function isPlainText(block: unknown): block is { type: 'text'; text: string } {
  if (typeof block !== 'object' || block === null) return false;
  const b = block as Record<string, unknown>;
  return b.type === 'text' && typeof b.text === 'string' && Object.keys(b).length === 2;
}

/**
 * A fleet result from an MCP `CallToolResult`. A server's output is
 * untrusted: its blocks and structured content get the checks every
 * handler's get (blocksResult), and what fails them fails the call saying
 * which block, rather than reaching a client that would choke on it. A tool
 * error (`isError`) is a failed call with its content kept.
 */
export function resultOf(call: Pick<ToolCall, 'id' | 'name'>, answer: CallToolResult, server: string): ToolResult {
  // Most results are one plain text block: read as it is (it came off the wire as JSON), the hot path skips the checks
  // below, which would find nothing to say of it.
  const only = Array.isArray(answer.content) && answer.content.length === 1 ? (answer.content[0] as unknown) : undefined;
  if (answer.structuredContent === undefined && (answer.isError === undefined || answer.isError === false) && isPlainText(only)) {
    return { toolCallId: call.id, name: call.name, content: only.text, isError: false };
  }
  const failed = (err: unknown): ToolResult => {
    const failure = isFleetError(err) ? err : new ExecutionFailedError(call.name, String(err));
    return { toolCallId: call.id, name: call.name, content: `${failure.message} (MCP server '${server}')`, isError: true, error: toWireError(failure) };
  };
  const raw = fromLegacy(answer);
  const wrong = shapeProblem(raw);
  if (wrong !== undefined) return failed(new ExecutionFailedError(call.name, `the server's answer is not an MCP tool result: ${wrong}`));
  let parts: BlocksResult;
  try {
    parts = blocksResult(call.name, raw.content ?? [], raw.structuredContent);
  } catch (err) {
    return failed(err);
  }
  const result: ToolResult = {
    toolCallId: call.id,
    name: call.name,
    ...parts,
    // Structured content alone still reads as text, as the fleet's own JSON results do.
    content: parts.content === '' && parts.structuredContent !== undefined && (parts.blocks?.length ?? 0) === 0 ? JSON.stringify(parts.structuredContent) : parts.content,
    isError: raw.isError === true,
  };
  if (raw.isError !== true) return result;
  const failure = new ExecutionFailedError(call.name, result.content === '' ? `MCP server '${server}' reported an error` : result.content.slice(0, 2000), { details: { server } });
  return { ...result, error: toWireError(failure) };
}

/**
 * What makes `raw` something other than a `CallToolResult`, where the blocks'
 * own check (blocksResult) would not say it: a `content` that is not an array
 * was read as no blocks, and an `isError` other than a boolean as a success.
 * MCP's schema makes a missing `content` an empty one and a missing `isError` false.
 */
function shapeProblem(raw: CallToolResult): string | undefined {
  const { content, isError } = raw as { content?: unknown; isError?: unknown };
  if (content !== undefined && !Array.isArray(content)) return `its 'content' is ${kindOf(content)}, not an array of content blocks`;
  if (isError !== undefined && typeof isError !== 'boolean') return `its 'isError' is ${kindOf(isError)}, not true or false`;
  return undefined;
}

/**
 * A 2024-10-07 server's answer (`{ toolResult }`, the revision's result of a
 * call, which the SDK's client still takes) as a result of today's: an object
 * becomes structured content with its JSON as the text block beside it (as
 * MCP asks of a tool that returns structured content), anything else the text.
 * An answer with `content` is today's, whatever else it carries.
 */
function fromLegacy(raw: CallToolResult): CallToolResult {
  if (raw.content !== undefined || !Object.hasOwn(raw, 'toolResult')) return raw;
  const value = (raw as { toolResult?: unknown }).toolResult;
  if (typeof value === 'object' && value !== null && !Array.isArray(value)) return { ...raw, content: [{ type: 'text', text: JSON.stringify(value) }], structuredContent: value as Record<string, unknown> };
  return { ...raw, content: [{ type: 'text', text: typeof value === 'string' ? value : JSON.stringify(value) }] };
}
