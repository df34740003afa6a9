import { EventEmitter } from 'node:events';
import { CancelledError, ExecutionFailedError, ExecutionTimeoutError, isFleetError, McpServerLostError, UnavailableError } from '@forge-fleet/shared';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { type CallToolResult, ErrorCode as McpErrorCode, McpError, type Progress, type Tool } from '@modelcontextprotocol/sdk/types.js';
import { type LaunchTools, stdioLaunchParameters } from './launch-command.js';
import type { McpStdioLaunch } from './pool-options.js';

/** The last bytes of a server's stderr kept for messages: enough for a stack trace's head, bounded however much it writes. */
const STDERR_TAIL_BYTES = 4096;

/** How the fleet names itself to servers in `initialize`. */
const CLIENT_INFO = { name: 'forge-fleet-worker', version: '0.1.0' } as const;

/** Why an instance ended, told once by its `exit` event. */
export interface McpInstanceExit {
  readonly pid: number;
  /** True when the instance was closed or killed through this object; false when it died on its own. */
  readonly expected: boolean;
  /** The last of what it wrote to stderr, for people. */
  readonly stderrTail: string;
}

/** The events of an {@link McpInstance}. */
export interface McpInstanceEvents {
  /** The process is gone (its pipes closed); emitted once. */
  exit: [McpInstanceExit];
}

/** What one {@link McpInstance.callTool} may add to the tool's name and arguments. */
export interface McpCallOptions {
  /** Aborting it sends `notifications/cancelled` for the call, which then ends with CANCELLED. */
  readonly signal?: AbortSignal;
  /** Receives each `notifications/progress` the server sends for the call. */
  readonly onProgress?: (progress: Progress) => void;
  /** The call ends with EXECUTION_TIMEOUT (and a cancel is sent) past this many milliseconds. */
  readonly timeoutMs: number;
}

/** The transport with its spawn made visible, so a process that fails `initialize` can still be killed by pid. */
class SpawnAwareTransport extends StdioClientTransport {
  spawnedPid: number | undefined;
  override async start(): Promise<void> {
    await super.start();
    this.spawnedPid = this.pid ?? undefined;
  }
}

/**
 * One running stdio MCP server process, connected with the official SDK's
 * client. The process has a session and process group of its own, dies with
 * the worker (see launch-command.ts) and sees only its declared environment.
 * Closing or killing it kills its whole process group, so what the server
 * started goes with it.
 */
export class McpInstance extends EventEmitter<McpInstanceEvents> {
  #ended = false;
  #expected = false;
  #stderrTail = '';

  private constructor(
    /** The server's name, for messages. */
    readonly server: string,
    /** The pid of the server process, which is also its process group id. */
    readonly pid: number,
    private readonly client: Client,
    private readonly transport: SpawnAwareTransport,
  ) {
    super();
  }

  /**
   * Starts a process and waits until it has answered `initialize`.
   *
   * @throws UnavailableError when it cannot be spawned, exits, or does not answer within `launch.startupTimeoutMs`; the process is killed first.
   */
  static async start(options: { server: string; launch: McpStdioLaunch; tools: LaunchTools }): Promise<McpInstance> {
    const { server, launch } = options;
    const transport = new SpawnAwareTransport(stdioLaunchParameters(options.tools, launch));
    let tail = '';
    // Drained from the start: a server blocked on a full stderr pipe would hang; only a bounded tail is kept.
    transport.stderr?.on('data', (chunk: Buffer) => {
      tail = (tail + chunk.toString('utf8')).slice(-STDERR_TAIL_BYTES);
    });
    const client = new Client(CLIENT_INFO, { capabilities: {} });
    try {
      await client.connect(transport, { timeout: launch.startupTimeoutMs });
    } catch (err) {
      // Killed before the SDK's close, which would otherwise give a hung server seconds to go; and after, for what it started meanwhile.
      if (transport.spawnedPid !== undefined) killGroup(transport.spawnedPid);
      await client.close().catch(() => undefined);
      if (transport.spawnedPid !== undefined) killGroup(transport.spawnedPid);
      const reason = isTimeout(err) ? `it did not answer initialize within ${launch.startupTimeoutMs} ms` : `it failed to start: ${errorText(err)}`;
      throw new UnavailableError(`${reason}${tail === '' ? '' : `; its stderr: ${tail.trim().slice(-1000)}`}`, { what: `MCP server '${server}' (${launch.command})`, cause: err });
    }
    const pid = transport.spawnedPid;
    if (pid === undefined) throw new UnavailableError('its process has no pid', { what: `MCP server '${server}' (${launch.command})` });
    const instance = new McpInstance(server, pid, client, transport);
    instance.#stderrTail = tail;
    transport.stderr?.on('data', (chunk: Buffer) => {
      instance.#stderrTail = (instance.#stderrTail + chunk.toString('utf8')).slice(-STDERR_TAIL_BYTES);
    });
    client.onclose = () => instance.#onEnded();
    return instance;
  }

  /** Whether the process is still connected. */
  get alive(): boolean {
    return !this.#ended;
  }

  /** The last of what the server wrote to stderr. */
  get stderrTail(): string {
    return this.#stderrTail;
  }

  /** Every tool the server lists now, following `nextCursor` pages. */
  async listTools(options: { timeoutMs: number }): Promise<Tool[]> {
    const tools: Tool[] = [];
    let cursor: string | undefined;
    do {
      const page = await this.client.listTools(cursor === undefined ? {} : { cursor }, { timeout: options.timeoutMs });
      tools.push(...page.tools);
      cursor = page.nextCursor;
    } while (cursor !== undefined);
    return tools;
  }

  /**
   * Calls one tool and returns its result as the server gave it (a tool's own
   * failure is a result with `isError`, not a throw).
   *
   * @throws CancelledError when `options.signal` aborts (a cancel was sent to the server).
   * @throws ExecutionTimeoutError past `options.timeoutMs` (a cancel was sent to the server).
   * @throws McpServerLostError when the process ends before the call does.
   * @throws ExecutionFailedError when the server answers with a JSON-RPC error (unknown tool, bad arguments…).
   */
  async callTool(name: string, args: Record<string, unknown>, options: McpCallOptions): Promise<CallToolResult> {
    if (this.#ended) throw this.#lost(name);
    try {
      // The SDK sends `notifications/cancelled` itself on abort and on its timeout, and routes progress by token.
      const result = await this.client.callTool({ name, arguments: args }, undefined, {
        timeout: options.timeoutMs,
        ...(options.signal === undefined ? {} : { signal: options.signal }),
        ...(options.onProgress === undefined ? {} : { onprogress: options.onProgress }),
      });
      return result as CallToolResult;
    } catch (err) {
      if (isFleetError(err)) throw err;
      if (options.signal?.aborted === true) throw new CancelledError(name, errorText(options.signal.reason));
      if (isTimeout(err)) throw new ExecutionTimeoutError(name, options.timeoutMs);
      if (this.#ended || (err instanceof McpError && (err.code as McpErrorCode) === McpErrorCode.ConnectionClosed) || (err instanceof Error && err.message === 'Not connected')) throw this.#lost(name, err);
      throw new ExecutionFailedError(name, `MCP server '${this.server}' refused the call: ${errorText(err)}`, {
        cause: err,
        details: { server: this.server, ...(err instanceof McpError ? { mcpCode: err.code } : {}) },
      });
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

  /** Kills the process group at once (SIGKILL); `exit` follows. */
  kill(): void {
    this.#expected = true;
    killGroup(this.pid);
  }

  /**
   * Ends the process: closes its stdin (the SDK then waits, SIGTERMs and
   * SIGKILLs the process in turn), then SIGKILLs its group so that whatever it
   * started dies too. Resolves once it is gone.
   */
  async close(): Promise<void> {
    this.#expected = true;
    if (this.#ended) {
      killGroup(this.pid);
      return;
    }
    const ended = new Promise<void>((resolve) => this.once('exit', () => resolve()));
    await this.client.close().catch(() => undefined);
    killGroup(this.pid);
    await ended;
  }

  #onEnded(): void {
    if (this.#ended) return;
    this.#ended = true;
    // The server's own children are in its group: they go with it.
    killGroup(this.pid);
    this.emit('exit', { pid: this.pid, expected: this.#expected, stderrTail: this.#stderrTail });
  }

  #lost(toolName: string, cause?: unknown): McpServerLostError {
    return new McpServerLostError(toolName, this.server, this.pid, { stderrTail: this.#stderrTail.trim().slice(-1000), cause });
  }
}

/**
 * SIGKILLs a process group; one already gone is not an error. The group, never
 * the bare pid: once the leader is reaped its pid may belong to someone else,
 * while a group id stays taken as long as any member lives.
 */
function killGroup(pgid: number): void {
  try {
    process.kill(-pgid, 'SIGKILL');
  } catch {
    // ESRCH: the whole group is gone already.
  }
}

function isTimeout(err: unknown): boolean {
  return err instanceof McpError && (err.code as McpErrorCode) === McpErrorCode.RequestTimeout;
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
