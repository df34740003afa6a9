import { EventEmitter } from 'node:events';
import { CancelledError, eachJsonValue, ExecutionFailedError, ExecutionTimeoutError, isFleetError, type McpServerLostError, ResourceLimitError } from '@forge-fleet/shared';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import {
  type CallToolResult,
  ErrorCode as McpErrorCode,
  LATEST_PROTOCOL_VERSION,
  McpError,
  type Progress,
  ProgressNotificationSchema,
  SUPPORTED_PROTOCOL_VERSIONS,
  type Tool,
  ToolListChangedNotificationSchema,
  ToolSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { answerCut, notAnAnswer, tooLargeBytes } from './answer-lines.js';
import { MODERN_REVISION } from './modern-era.js';
import { redactJson, redactSecrets } from './secret-value.js';
import { ANY_RESULT, callAsTask } from './task-call.js';

/** Pages of one `tools/list` the worker follows at most. */
export const MAX_LIST_PAGES = 1000;

/** Tools of one server the worker takes at most. */
export const MAX_LISTED_TOOLS = 10_000;

/** Characters of JSON one server's whole tool list may take (each page is bounded on its own as a message). */
export const MAX_LISTING_CHARS = 32 * 1024 * 1024;

/** A tool of a server's list that the fleet does not serve, and why. */
export interface SkippedTool {
  readonly tool: string;
  readonly reason: string;
}

/** A server's whole `tools/list`: the entries that are MCP tools, and those that are not, each with what is wrong. */
export interface ServerListing {
  readonly tools: readonly Tool[];
  readonly refused: readonly SkippedTool[];
}

/**
 * One page of `tools/list` as the worker reads it: the page's shape, not each
 * tool's. The SDK's `listTools` checks every tool of a page at once, so one
 * entry it refuses (a schema of another type, a hint that is not a boolean)
 * failed the whole listing, and every tool of the server went with it.
 */
const LISTING_PAGE = z.object({ tools: z.array(z.unknown()), nextCursor: z.string().optional() });

/** How the fleet names itself to servers in `initialize`. */
const CLIENT_INFO = { name: 'forge-fleet-worker', version: '0.1.0' } as const;

/** Why an instance ended, told once by its `exit` event. */
export interface McpInstanceExit {
  /** The instance for people: `pid 1234` for a process, `session 6f1c… at https://host/mcp` for an HTTP session. */
  readonly instance: string;
  /** The process id of a stdio instance; `undefined` for an HTTP session. */
  readonly pid: number | undefined;
  /** True when the instance was closed or abandoned through this object; false when it ended on its own. */
  readonly expected: boolean;
  /** What is known of why, for people: a process's last stderr, an upstream's failure (never a header value); may be ''. */
  readonly detail: string;
  /** Why the worker ended an instance that was still running, for people (`closed its stdout …`); undefined when it ended on its own or was closed. */
  readonly cause?: string;
}

/** The events of an {@link UpstreamInstance}. */
export interface McpInstanceEvents {
  /** The process is gone or the session ended; emitted once. */
  exit: [McpInstanceExit];
}

/** What the pool hands an instance when it starts one. */
export interface UpstreamHooks {
  /** The server sent `notifications/tools/list_changed` (from `initialize` on: a server may add tools right after it). */
  readonly onToolsChanged?: () => void;
  /** A line the server wrote to its stderr (a stdio server's; bounded and redacted, see stderr-lines.ts), with its process id. */
  readonly onStderr?: (line: string, pid: number | undefined) => void;
  /** Aborted when the pool closes: a start still waiting for `initialize` gives up at once (its process is killed). */
  readonly startSignal?: AbortSignal;
  /**
   * What a stdio server wrote on its stdout that is no JSON-RPC message, dropped (a message for its operator: the
   * line's fault, cut short, secrets redacted; at most a few every 10 s, the rest counted).
   */
  readonly onUnreadable?: (text: string, pid: number | undefined) => void;
}

/** What one {@link UpstreamInstance.callTool} may add to the tool's name and arguments. */
export interface McpCallOptions {
  /** Aborting it sends `notifications/cancelled` for the call, which then ends with CANCELLED. */
  readonly signal?: AbortSignal;
  /** Receives each `notifications/progress` the server sends for the call, in the order it sent them. */
  readonly onProgress?: (progress: Progress) => void;
  /** The call ends with EXECUTION_TIMEOUT (and a cancel is sent) past this many milliseconds. */
  readonly timeoutMs: number;
  /** Call it as a task (the tool lists `execution.taskSupport: "required"`): see task-call.ts. */
  readonly asTask?: boolean;
  /** The tool as the fleet's caller knows it (`prefix.tool`), for the errors' messages; the server's own name by default. */
  readonly label?: string;
}

/**
 * One connection to an MCP server through the official SDK's client — a
 * stdio process (instance.ts) or a Streamable HTTP session (http-instance.ts).
 * What does not depend on the transport lives here: listing and calling
 * tools, pings, progress routing, `list_changed`, and how an SDK failure
 * becomes a fleet error. The pool sees only this class.
 */
export abstract class UpstreamInstance extends EventEmitter<McpInstanceEvents> {
  /** Progress callbacks of running calls, by the token this instance gave each call. */
  readonly #progress = new Map<string, (progress: Progress) => void>();
  #nextToken = 0;
  #ended = false;
  /** Set before this object ends the connection itself, so that the end is not taken for a failure. */
  protected expected = false;
  /**
   * The secret values the server was given (its environment's, an upstream's header values), replaced wherever
   * what it sends back is kept or shown: results, listings, progress messages, errors (see redactJson).
   */
  protected secrets: readonly string[] = [];

  /** The client every subclass connects; created here so that no notification can arrive before its handler. */
  protected readonly client: Client;

  protected constructor(
    /** The server's name, for messages. */
    readonly server: string,
    hooks: UpstreamHooks,
  ) {
    super();
    // No capabilities: the fleet answers no roots, sampling or elicitation requests, so it claims none.
    this.client = new Client(CLIENT_INFO, { capabilities: {} });
    // Set directly rather than through the Client's `listChanged` option, which listens only to servers that
    // declare `tools.listChanged`: a server that sends the notification without declaring it is followed too.
    this.client.setNotificationHandler(ToolListChangedNotificationSchema, () => hooks.onToolsChanged?.());
    // Progress is routed here rather than by the SDK's `onprogress`: the SDK drops its progress handler as soon as
    // the response arrives, while notifications are handled a tick later, so the last step (sent just before the
    // result) was lost. A token of our own stays routed until the call's own code has seen the result.
    this.client.setNotificationHandler(ProgressNotificationSchema, (notification) => {
      const { progressToken, _meta: _ignored, ...progress } = notification.params;
      this.#progress.get(String(progressToken))?.(typeof progress.message === 'string' ? { ...progress, message: redactJson(progress.message, this.secrets) } : progress);
    });
  }

  /** The instance for people, as in {@link McpInstanceExit.instance}. */
  abstract get id(): string;

  /** The process id of a stdio instance; `undefined` for an HTTP session. */
  abstract get pid(): number | undefined;

  /** Whether it is still connected. */
  get alive(): boolean {
    return !this.#ended;
  }

  /**
   * Every tool the server lists now, following `nextCursor` pages, all of
   * them within `timeoutMs`. The pages are the server's to give, so they are
   * followed only so far: a listing that leads back to a cursor already
   * followed, runs past {@link MAX_LIST_PAGES} pages, {@link MAX_LISTED_TOOLS}
   * tools or {@link MAX_LISTING_CHARS} of JSON fails (the server is then down,
   * saying why) rather than holding the worker's import, and its memory, for
   * ever.
   *
   * @throws ExecutionFailedError for such a listing, or when the server refuses `tools/list`.
   * @throws ExecutionTimeoutError past `timeoutMs`.
   */
  async listTools(options: { timeoutMs: number }): Promise<ServerListing> {
    const tools: Tool[] = [];
    const refused: SkippedTool[] = [];
    const followed = new Set<string>();
    let chars = 0;
    const deadline = Date.now() + options.timeoutMs;
    let cursor: string | undefined;
    try {
      do {
        if (cursor !== undefined) {
          if (followed.has(cursor)) throw this.#badListing(`its tools/list pages lead back to cursor ${JSON.stringify(cursor.slice(0, 64))} again`);
          if (followed.size + 1 >= MAX_LIST_PAGES) throw this.#badListing(`its tools/list runs to more than ${MAX_LIST_PAGES} pages`);
          followed.add(cursor);
        }
        const page = await this.client.request({ method: 'tools/list', params: cursor === undefined ? {} : { cursor } }, LISTING_PAGE, { timeout: Math.max(1, deadline - Date.now()) });
        for (const entry of redactJson(page.tools, this.secrets)) {
          const checked = checkedTool(entry);
          if ('tool' in checked) tools.push(checked.tool);
          else refused.push(checked.skipped);
        }
        if (tools.length + refused.length > MAX_LISTED_TOOLS) throw this.#badListing(`it lists more than ${MAX_LISTED_TOOLS} tools`);
        chars += jsonChars(page.tools, MAX_LISTING_CHARS);
        if (chars > MAX_LISTING_CHARS) throw this.#badListing(`its tools take more than ${MAX_LISTING_CHARS / 1024 / 1024} MiB of JSON`);
        cursor = page.nextCursor;
      } while (cursor !== undefined);
    } catch (err) {
      // A page past a message's bound is the listing's fault, said as the others are (not as a tool call's output).
      const tooLarge = tooLargeBytes(err);
      if (tooLarge !== undefined) {
        throw this.#badListing(`one page of its tools/list takes ${tooLarge.atLeast ? 'more than ' : ''}${tooLarge.bytes} bytes, over the ${tooLarge.bound} one message of a server may be: it must page its list (nextCursor)`);
      }
      // A page whose result is no page of tools (no `tools` array, a cursor that is not a string): the SDK's check of
      // the result schema given to `request`, said as the listing's fault rather than as a malformed message.
      const issue = schemaIssue(err);
      if (issue !== undefined) throw this.#badListing(`a page of its tools/list is not one: ${issue}`);
      throw this.#listingFailure(err, options.timeoutMs);
    }
    return { tools, refused };
  }

  /**
   * A listing that failed, said as the listing's failure for an operator (the worker's log, `/readyz`), not as a
   * tool call's: no "raise the tool's timeoutMs" (the bound on a listing is the fleet's), no "whether it took effect".
   */
  #listingFailure(err: unknown, timeoutMs: number): Error {
    if (isFleetError(err)) return err;
    if (isMcpError(err, McpErrorCode.RequestTimeout)) return this.#badListing(`its tools/list did not arrive within ${timeoutMs} ms, the bound on one whole listing`);
    if (this.#ended || (err instanceof Error && err.message === 'Not connected') || this.connectionFailed(err)) return this.#badListing(`its instance (${this.id}) ended while it listed its tools`);
    const cut = answerCut(err);
    if (cut !== undefined) return this.#badListing(`its answer to tools/list broke off: ${cut}`);
    // The body is not shown: a proxy's error page, or what the server should not have sent (a key it was given).
    if (err instanceof SyntaxError) return this.#badListing('it answered tools/list with a body that is not JSON (not shown)');
    const wrong = notAnAnswer(err) ?? notJsonRpc(err);
    if (wrong !== undefined) return this.#badListing(`it answered tools/list with neither a result nor an error (${wrong})`);
    return this.#badListing(`it answered tools/list with an error: ${this.describe(err).replace(/\s*[\r\n]+\s*/g, ' ')}`);
  }

  /** What a first listing that fails leaves out is every tool; a later one leaves the tools it listed last served (see worker-servers.ts). */
  #badListing(why: string): ExecutionFailedError {
    return new ExecutionFailedError('tools/list', `MCP server '${this.server}' cannot be listed: ${why}`, { details: { server: this.server } });
  }

  /**
   * Calls one tool and returns its result as the server gave it (a tool's own
   * failure is a result with `isError`, not a throw).
   *
   * @throws CancelledError when `options.signal` aborts (a cancel was sent to the server).
   * @throws ExecutionTimeoutError past `options.timeoutMs` (a cancel was sent to the server).
   * @throws McpServerLostError when the process or session ends before the call does.
   * @throws ExecutionFailedError when the server answers with a JSON-RPC error (unknown tool, bad arguments…).
   */
  async callTool(name: string, args: Record<string, unknown>, options: McpCallOptions): Promise<CallToolResult> {
    const label = options.label ?? name;
    if (this.#ended) throw this.lost(label);
    const token = `forge-${(this.#nextToken += 1)}`;
    if (options.asTask === true) return this.#callAsTask(name, label, args, token, options);
    if (options.onProgress !== undefined) this.#progress.set(token, options.onProgress);
    // The SDK's own timeout fails the call with -32001, the code a server may also send (a timeout of its own
    // upstream, say). This timer of the same length is set first, so it has fired by the time the SDK's has:
    // a -32001 before it is the server's answer, not the call's timeout.
    const expiry = { passed: false };
    const timer = setTimeout(() => (expiry.passed = true), options.timeoutMs);
    try {
      // The SDK sends `notifications/cancelled` itself on abort and on its timeout. A plain request, not
      // `callTool`: the fleet checks the result itself, once (its blocks as content blocks, its structured content
      // against the tool's output schema, failing OUTPUT_VALIDATION), so the SDK's second pass of zod over every
      // result — and its output-schema check, which would fail the call as a JSON-RPC error — are left out.
      const result = await this.client.request({ method: 'tools/call', params: { name, arguments: args, ...(options.onProgress === undefined ? {} : { _meta: { progressToken: token } }) } }, ANY_RESULT, {
        timeout: options.timeoutMs,
        ...(options.signal === undefined ? {} : { signal: options.signal }),
      });
      return redactJson(result, this.secrets);
    } catch (err) {
      throw this.#failure(label, err, { ...options, expiry });
    } finally {
      clearTimeout(timer);
      this.#progress.delete(token);
    }
  }

  /**
   * {@link callTool} for a tool that must run as a task. Its progress token
   * stays valid for the task's whole life, so the server's progress
   * notifications arrive as for any call; a status message of the task is
   * reported at the progress reached so far (or the count of messages, when
   * the server reports none).
   */
  async #callAsTask(name: string, label: string, args: Record<string, unknown>, token: string, options: McpCallOptions): Promise<CallToolResult> {
    const report = options.onProgress;
    let last: Progress | undefined;
    let statuses = 0;
    if (report !== undefined) {
      this.#progress.set(token, (p) => {
        last = p;
        report(p);
      });
    }
    const onStatus =
      report === undefined
        ? undefined
        : (message: string): void => {
            statuses += 1;
            report({ progress: last?.progress ?? statuses, ...(last?.total === undefined ? {} : { total: last.total }), message: redactJson(message, this.secrets) });
          };
    try {
      const result = await callAsTask(this.client, { name, arguments: args, ...(report === undefined ? {} : { _meta: { progressToken: token } }) }, { timeoutMs: options.timeoutMs, signal: options.signal, onStatus });
      return redactJson(result, this.secrets);
    } catch (err) {
      throw this.#failure(label, err, options);
    } finally {
      this.#progress.delete(token);
    }
  }

  /** Whether the server answers a `ping` within `timeoutMs`: one that does not has stopped answering. */
  async ping(timeoutMs: number): Promise<boolean> {
    if (this.#ended) return false;
    try {
      await this.client.ping({ timeout: timeoutMs });
      return true;
    } catch {
      return false;
    }
  }

  /** Ends the instance and resolves once it is gone: a process is stopped, a session is terminated. */
  abstract close(): Promise<void>;

  /** Ends the instance at once, without waiting (one that stopped answering): a process is SIGKILLed, a session dropped. */
  abstract abandon(): void;

  /**
   * The error of a call that the end of this instance cut short, or with `answerCut` one whose own answer broke off
   * on its way while the instance serves on (how it broke off).
   */
  protected abstract lost(toolName: string, cause?: unknown, answerCut?: string): McpServerLostError;

  /** Whether `err`, thrown by the SDK, means the connection itself failed (beyond the SDK's own "closed"); false by default. */
  protected connectionFailed(_err: unknown): boolean {
    return false;
  }

  /** What of `err` may be shown: its message, the server's secret values redacted (a server's error text may echo them). */
  protected describe(err: unknown): string {
    return redactSecrets(err instanceof Error ? err.message : String(err), this.secrets);
  }

  /** What of `err` may travel as a fleet error's `cause` (logged with it): an error whose text holds a secret, retold without it. */
  protected causeOf(err: unknown): unknown {
    const text = err instanceof Error ? err.message : String(err);
    const shown = redactSecrets(text, this.secrets);
    return shown === text ? err : new Error(shown);
  }

  /** Marks the instance ended, once, and tells the `exit` listeners. */
  protected markEnded(detail: string, cause?: string): void {
    if (this.#ended) return;
    this.#ended = true;
    this.emit('exit', { instance: this.id, pid: this.pid, expected: this.expected, detail, ...(cause === undefined ? {} : { cause }) });
  }

  /**
   * The fleet error for what the SDK threw. Two JSON-RPC codes are also the SDK's own: -32001 when its timeout
   * fires and -32000 when the connection closes. A server may send either, so they are read as a timeout only
   * once the call's time has passed (`expiry`, where the caller keeps one) and as a lost instance only once it
   * has ended; before that they are the server's own failure of the call, EXECUTION_FAILED like any other code.
   */
  #failure(name: string, err: unknown, options: { signal?: AbortSignal | undefined; timeoutMs: number; expiry?: { readonly passed: boolean } }): Error {
    if (isFleetError(err)) return err;
    if (options.signal?.aborted === true) return new CancelledError(name, this.describe(options.signal.reason));
    if (isMcpError(err, McpErrorCode.RequestTimeout) && (options.expiry?.passed ?? true)) return new ExecutionTimeoutError(name, options.timeoutMs);
    const tooLarge = tooLargeBytes(err);
    if (tooLarge !== undefined) {
      return new ResourceLimitError(name, 'output', `MCP server '${this.server}' answered with ${tooLarge.atLeast ? 'more than ' : ''}${tooLarge.bytes} bytes, over the ${tooLarge.bound} a server's message may be`, {
        by: 'the worker',
        remedy: 'ask for less in one call (a part of the file, a page of the results)',
      });
    }
    const cut = answerCut(err);
    if (cut !== undefined) return this.lost(name, undefined, cut);
    // The body is not shown: a proxy's error page, or what the server should not have sent (a key it was given).
    if (err instanceof SyntaxError) return new ExecutionFailedError(name, `MCP server '${this.server}' answered the call with a body that is not JSON (not shown)`, { details: { server: this.server } });
    const wrong = notAnAnswer(err) ?? notJsonRpc(err);
    if (wrong !== undefined) {
      return new ExecutionFailedError(name, `MCP server '${this.server}' answered the call with neither a result nor an error (${wrong})`, { details: { server: this.server } });
    }
    // The SDK ends the instance (its onclose) before it fails the calls the close cut short.
    if (this.#ended || (err instanceof Error && err.message === 'Not connected')) return this.lost(name, err);
    if (this.connectionFailed(err)) return this.lost(name, err);
    return new ExecutionFailedError(name, `MCP server '${this.server}' refused the call: ${this.describe(err)}`, {
      cause: this.causeOf(err),
      details: { server: this.server, ...(err instanceof McpError ? { mcpCode: err.code } : {}) },
    });
  }
}

/**
 * One entry of a server's list as an MCP tool, or why it is not one: the
 * first thing MCP's Tool shape finds wrong with it, in words that say which
 * part of the entry. The others of the list are served regardless.
 */
export function checkedTool(entry: unknown): { tool: Tool } | { skipped: SkippedTool } {
  const parsed = ToolSchema.safeParse(entry);
  if (parsed.success) return { tool: parsed.data };
  const name = typeof entry === 'object' && entry !== null ? (entry as { name?: unknown }).name : undefined;
  const tool = typeof name === 'string' ? name : `(an entry whose name is ${name === undefined ? 'missing' : JSON.stringify(name)?.slice(0, 64) ?? typeof name})`;
  const issue = parsed.error.issues[0];
  const path = issue?.path.map(String) ?? [];
  const schema = path[0] === 'inputSchema' || path[0] === 'outputSchema' ? path[0] : undefined;
  const reason =
    schema !== undefined && (path.length === 1 || path[1] === 'type')
      ? `its ${schema} is not an object schema: MCP requires one with "type": "object" at its root`
      : `it is not an MCP tool: ${path.length === 0 ? 'the entry' : path.join('.')}: ${String(issue?.message ?? 'refused by the MCP schema').slice(0, 200)}`;
  return { skipped: { tool, reason } };
}

/**
 * What was wrong, when `err` is the schema error the SDK's HTTP transport fails a request with whose answer (a
 * JSON body) is not a JSON-RPC message; else undefined. Only its first issue is told, and no value of the answer.
 */
function notJsonRpc(err: unknown): string | undefined {
  const issue = schemaIssue(err);
  return issue === undefined ? undefined : `it is not a JSON-RPC message: ${issue}`;
}

/**
 * The first issue of a failed schema check (zod's error, whichever class the SDK's zod gives it: its name differs
 * between zod's builds), as `what is wrong at path`, no value of the checked message in it; else undefined.
 */
export function schemaIssue(err: unknown): string | undefined {
  const issues = typeof err === 'object' && err !== null ? (err as { issues?: unknown }).issues : undefined;
  if (!(err instanceof Error) || !Array.isArray(issues) || issues.length === 0) return undefined;
  const issue = issues[0] as { path?: PropertyKey[]; message?: string };
  const at = issue.path === undefined || issue.path.length === 0 ? '' : ` at ${issue.path.map(String).join('.')}`;
  return `${String(issue.message ?? 'refused by the MCP schema').slice(0, 200)}${at}`;
}

/**
 * About how many characters `value` takes as JSON, counted by a walk with a
 * stack of its own: JSON.stringify would recurse, and a schema nested
 * thousands deep (which the import leaves out, serving the rest) is exactly
 * what it cannot write. Stops counting past `limit`.
 */
function jsonChars(value: unknown, limit: number): number {
  let chars = 0;
  eachJsonValue(value, (node) => {
    if (typeof node === 'string') chars += node.length + 2;
    else if (Array.isArray(node)) chars += node.length + 1;
    else if (typeof node === 'object' && node !== null) {
      chars += 2;
      for (const key of Object.keys(node)) chars += key.length + 4;
    } else chars += String(node).length;
    return chars <= limit;
  });
  return chars;
}

/** Whether `err` is the SDK's McpError with `code`. */
export function isMcpError(err: unknown, code: McpErrorCode): boolean {
  return err instanceof McpError && (err.code as McpErrorCode) === code;
}

/** The JSON-RPC code of a server that does not speak the revision an `initialize` asked for (MCP 2026-07-28's UnsupportedProtocolVersion). */
export const UNSUPPORTED_PROTOCOL_VERSION = -32022;

/** A protocol revision as MCP names them (`2025-11-25`): the only part of a refusal's data that a message repeats. */
const REVISION = /^\d{4}-\d{2}-\d{2}$/;

/**
 * The revisions a server says it speaks, from the `data` of the error it
 * refused `initialize` with (`{ supported: [...], requested }`), or undefined
 * when the error is some other one. Strings that are not revisions are
 * dropped, so nothing else of what a server sent reaches a message.
 */
export function refusedRevisions(code: unknown, data: unknown): string[] | undefined {
  const supported = typeof data === 'object' && data !== null ? (data as { supported?: unknown }).supported : undefined;
  // MCP 2025-era servers refuse a revision with InvalidParams and the same data; that code alone means other things.
  if (code !== UNSUPPORTED_PROTOCOL_VERSION && !(code === McpErrorCode.InvalidParams && Array.isArray(supported))) return undefined;
  return Array.isArray(supported) ? supported.filter((v): v is string => typeof v === 'string' && REVISION.test(v)) : [];
}

/** What the SDK's client says of an `initialize` answered with a revision it does not speak. */
const ANSWERED_REVISION = /^Server's protocol version is not supported: (.*)$/s;

/**
 * Why a server that answered `initialize` with a revision the worker does not
 * speak cannot be served, naming that revision and the worker's; undefined
 * for any other failure. The SDK's client refuses such an answer itself.
 */
export function answeredRevision(err: unknown, workerSpeaks: readonly string[] = [...SUPPORTED_PROTOCOL_VERSIONS, MODERN_REVISION]): string | undefined {
  const answered = err instanceof Error ? ANSWERED_REVISION.exec(err.message)?.[1] : undefined;
  if (answered === undefined) return undefined;
  const theirs = REVISION.test(answered) ? `MCP ${answered}` : 'a revision that is no MCP revision';
  return `it answered initialize with ${theirs}, which the worker does not speak; the worker's MCP client speaks ${workerSpeaks.join(', ')} here`;
}

/**
 * Why a server that refused the worker's protocol revision cannot be served,
 * for `/readyz` and the log. The worker's client (SDK 1.x) speaks the 2025-era
 * handshake; the worker also bridges to a server that speaks only MCP
 * 2026-07-28 (modern-era.ts), over stdio and HTTP. A server of the v2 SDK
 * serves 2025-era clients unless built to refuse them (`legacy: 'reject'`).
 *
 * @param supported the revisions the server says it speaks
 * @param workerSpeaks the revisions the worker speaks: the SDK's and the bridged one, unless told otherwise
 */
export function revisionRefusal(supported: readonly string[], workerSpeaks: readonly string[] = [...SUPPORTED_PROTOCOL_VERSIONS, MODERN_REVISION]): string {
  const theirs = supported.length === 0 ? 'none of the revisions the worker speaks' : `only MCP ${supported.join(', ')}`;
  return (
    `it speaks ${theirs} and refused the worker's initialize for ${LATEST_PROTOCOL_VERSION}; the worker's MCP client speaks ` +
    `${workerSpeaks.join(', ')} here. Serve 2025-era clients too (a server of the v2 SDK does unless built with legacy: 'reject')`
  );
}
