import type { Stream } from 'node:stream';
import { McpServerLostError, UnavailableError } from '@forge-fleet/shared';
import { McpError, ErrorCode as McpErrorCode } from '@modelcontextprotocol/sdk/types.js';
import { MODERN_ONLY, MODERN_REVISION } from './modern-era.js';
import type { GroupReaper } from './group-reaper.js';
import { descendantsOf, killEach, killGroup, type ProcessEntry } from './process-tree.js';
import { redactSecrets, secretForms } from './secret-value.js';
import { StderrLines } from './stderr-lines.js';
import { StderrTail } from './stderr-tail.js';
import { type ProcessEnd, SpawnAwareTransport } from './stdio-transport.js';
import { StdoutWatch } from './stdout-watch.js';
import { ToldPerWindow } from './told-per-window.js';
import { type LaunchTools, stdioLaunch } from './launch-command.js';
import type { McpStdioLaunch } from './pool-options.js';
import { answeredRevision, isMcpError, refusedRevisions, revisionRefusal, schemaIssue, UpstreamInstance, type UpstreamHooks } from './upstream-instance.js';

export type { McpCallOptions, McpInstanceEvents, McpInstanceExit } from './upstream-instance.js';

/** How long a failed start waits for the rest of the server's stderr. */
const STDERR_DRAIN_MS = 250;

/** The most of a server's stderr a failure to start quotes: its last lines, up to this many characters. */
const STDERR_MESSAGE_CHARS = 1000;

/** The last bytes of a server's stderr kept for messages: enough for a stack trace's head, bounded however much it writes. */
const STDERR_TAIL_CHARS = 4096;
/** How long closing an instance waits for its stopped reaper to exit and be reaped. */
const REAPER_EXIT_MS = 1000;

/** Unreadable stdout lines of a server logged per window at most (see told-per-window.ts). */
const UNREADABLE_PER_WINDOW = 10;

/** Lines of a server's stderr logged per window at most; a server printing more is told as a count. */
const STDERR_LINES_PER_WINDOW = 100;
const STDERR_WINDOW_MS = 10_000;


/**
 * One running stdio MCP server process, connected with the official SDK's
 * client. The process has a session and process group of its own, dies with
 * the worker (see launch-command.ts) and sees only its declared environment.
 * Closing or killing it kills its whole process group, so what the server
 * started goes with it.
 */
export class McpInstance extends UpstreamInstance {
  #stderrTail: StderrTail | undefined;
  #pid = 0;
  #reaper: GroupReaper | undefined;
  /** Outside a PID namespace: what it starts in a session of its own escapes the group kill, and is looked for (see {@link #escaped}). */
  #unconfined = false;

  private constructor(server: string, hooks: UpstreamHooks) {
    super(server, hooks);
  }

  /**
   * Starts a process and waits until it has answered `initialize`.
   *
   * @throws UnavailableError when it cannot be spawned, exits (saying how: its status or signal, and the last lines of its
   *   stderr, redacted), or does not answer within `launch.startupTimeoutMs`; the process is killed first.
   */
  static async start(options: { server: string; launch: McpStdioLaunch; tools: LaunchTools } & UpstreamHooks): Promise<McpInstance> {
    const { server, launch } = options;
    const instance = new McpInstance(server, options);
    // Longest first: a secret that holds another is replaced whole.
    instance.secrets = secretForms(launch.secrets ?? []);
    const { parameters, needsReaper, pinned } = stdioLaunch(options.tools, launch, server);
    const modern = MODERN_ONLY.has(launch);
    const transport = new SpawnAwareTransport(parameters, needsReaper ? options.tools.sh : undefined, modern, launch.maxMessageBytes, pinned?.descriptors);
    // Drained from the start: a server blocked on a full stderr pipe would hang. A bounded tail is kept for the
    // instance's exit; its lines go to the worker's log at a bounded rate, secrets redacted (stderr-lines.ts).
    const onStderr = options.onStderr;
    const lines =
      onStderr === undefined
        ? undefined
        : new StderrLines(
            { secrets: instance.secrets, maxLines: STDERR_LINES_PER_WINDOW, windowMs: STDERR_WINDOW_MS },
            (line) => onStderr(line, transport.spawnedPid),
            (left) => onStderr(`(${left} more lines of its stderr were not logged: at most ${STDERR_LINES_PER_WINDOW} every ${STDERR_WINDOW_MS / 1000} s are)`, transport.spawnedPid),
          );
    // What the SDK's reader could not take (a line that is not JSON, or not JSON-RPC) is dropped there and reported
    // here, for the operator: a call whose answer was such a line then ends at its timeout, and the log says why.
    const onUnreadable = options.onUnreadable;
    if (onUnreadable !== undefined) {
      const told = new ToldPerWindow(UNREADABLE_PER_WINDOW, STDERR_WINDOW_MS);
      instance.client.onerror = (error) => {
        const left = told.take();
        if (left === 'drop') return;
        if (left > 0) onUnreadable(`(${left} more such lines were not logged: at most ${UNREADABLE_PER_WINDOW} every ${STDERR_WINDOW_MS / 1000} s are)`, transport.spawnedPid);
        onUnreadable(unreadableText(error, instance.secrets), transport.spawnedPid);
      };
    }
    const stderrTail = new StderrTail(instance.secrets, STDERR_TAIL_CHARS);
    instance.#stderrTail = stderrTail;
    transport.stderr?.on('data', (chunk: Buffer) => {
      stderrTail.push(chunk);
      lines?.push(chunk);
    });
    transport.stderr?.on('end', () => lines?.end());
    try {
      // Once it answered (or failed to), bubblewrap has made its mounts: the pinned paths are no longer needed.
      await instance.client.connect(transport, { timeout: launch.startupTimeoutMs, ...(options.startSignal === undefined ? {} : { signal: options.startSignal }) }).finally(() => pinned?.close());
    } catch (err) {
      // How it ended on its own, read before it is killed below: that end is ours, not the server's.
      const ended = transport.exited;
      // Killed before the SDK's close, which would otherwise give a hung server seconds to go; and after, for what it started meanwhile.
      if (transport.spawnedPid !== undefined) killGroup(transport.spawnedPid);
      await instance.client.close().catch(() => undefined);
      if (transport.spawnedPid !== undefined) killGroup(transport.spawnedPid);
      await transport.reaper?.stopAndReap(REAPER_EXIT_MS);
      // What it printed before it died is the likeliest reason: read the rest of its stderr (briefly) before saying why.
      await stderrEnded(transport.stderr, STDERR_DRAIN_MS);
      const revisions = err instanceof McpError ? refusedRevisions(err.code, err.data) : undefined;
      if (!modern && revisions?.includes(MODERN_REVISION) === true) {
        // Known from here on: the pool's next instances of this server start bridged, without a refused handshake first.
        MODERN_ONLY.add(launch);
        return McpInstance.start(options);
      }
      const reason = isMcpError(err, McpErrorCode.RequestTimeout)
        ? `it did not answer initialize within ${launch.startupTimeoutMs} ms`
        : revisions !== undefined
          ? revisionRefusal(revisions)
          : (answeredRevision(err) ?? (ended === undefined ? startFailure(err) : `its process ${endText(ended)} before answering initialize`));
      const tail = lastLines(instance.stderrTail.trim(), STDERR_MESSAGE_CHARS);
      throw new UnavailableError(`${reason}${tail === '' ? '' : `; its stderr: ${tail}`}`, { what: `MCP server '${server}' (${launch.command})`, cause: err });
    }
    const pid = transport.spawnedPid;
    if (pid === undefined) throw new UnavailableError('its process has no pid', { what: `MCP server '${server}' (${launch.command})` });
    instance.#pid = pid;
    instance.#reaper = transport.reaper;
    instance.#unconfined = needsReaper;
    // In a PID namespace the launchers stay the server's parents and hold its stdout too: its end of file never
    // comes when the server closes it (see stdout-watch.ts). Outside one, endsWithItsStdout (stdio-transport.ts) sees it.
    const watch = needsReaper
      ? undefined
      : StdoutWatch.start(pid, () => {
          transport.stdoutClosed = true;
          killGroup(pid);
        });
    instance.client.onclose = () => {
      watch?.stop();
      // The server's own children are in its group: they go with it; then its reaper, which has nothing left to do.
      killGroup(pid);
      transport.reaper?.stop();
      instance.markEnded(instance.expected ? '' : instance.stderrTail.trim(), transport.stdoutClosed ? 'closed its stdout while it ran, so it could answer nothing more: the worker ended it' : undefined);
    };
    return instance;
  }

  override get id(): string {
    return `pid ${this.#pid}`;
  }

  /** The pid of the server process, which is also its process group id. */
  override get pid(): number {
    return this.#pid;
  }

  /** The pid of its group's reaper, the worker's child; undefined in a PID namespace, which needs none. */
  get reaperPid(): number | undefined {
    return this.#reaper?.pid;
  }

  /**
   * The last of what the server wrote to stderr, with every secret of its
   * environment replaced: a server that prints its token on a failure must not
   * put it into the worker's log, an error or `/readyz`.
   */
  get stderrTail(): string {
    return this.#stderrTail?.text ?? '';
  }

  /** Kills the process group at once (SIGKILL), and what the server started outside it; `exit` follows. */
  kill(): void {
    this.expected = true;
    const escaped = this.#escaped();
    killGroup(this.#pid);
    killEach(escaped);
  }

  override abandon(): void {
    this.kill();
  }

  /**
   * Ends the process: closes its stdin (the SDK then waits, SIGTERMs and
   * SIGKILLs the process in turn), then SIGKILLs its group so that whatever it
   * started dies too. Resolves once it is gone.
   */
  override async close(): Promise<void> {
    this.expected = true;
    if (!this.alive) {
      killGroup(this.#pid);
      return;
    }
    const ended = new Promise<void>((resolve) => this.once('exit', () => resolve()));
    // Looked for while the server lives: once it has exited, what it started belongs to PID 1.
    const escaped = this.#escaped();
    await this.client.close().catch(() => undefined);
    killGroup(this.#pid);
    killEach(escaped);
    await ended;
    // Its reaper (stopped as the server ended) is reaped before this resolves, or a worker that stops right after leaves it to PID 1.
    await this.#reaper?.stopAndReap(REAPER_EXIT_MS);
  }

  /**
   * The processes the server started that left its process group (a helper
   * spawned `detached`, a daemon that called `setsid`) while still its
   * descendants, so that the group kill does not leave them running. Inside a
   * PID namespace, none: the namespace takes them all.
   */
  #escaped(): ProcessEntry[] {
    return this.#unconfined && this.alive ? descendantsOf(this.#pid).filter((p) => p.pgrp !== this.#pid) : [];
  }

  protected override lost(toolName: string, cause?: unknown, answerCut?: string): McpServerLostError {
    return new McpServerLostError(toolName, this.server, this.#pid, { stderrTail: this.stderrTail.trim().slice(-1000), cause, ...(answerCut === undefined ? {} : { answerCut }) });
  }
}

/** `exited with status 1`, `was killed by signal SIGSEGV`. */
function endText(end: ProcessEnd): string {
  return end.signal !== null ? `was killed by signal ${end.signal}` : `exited with status ${end.code ?? 'unknown'}`;
}

/** The last whole lines of `text` that fit in `max` characters (the end of the last one, when even it does not fit). */
function lastLines(text: string, max: number): string {
  if (text.length <= max) return text;
  const end = text.slice(-max);
  const start = end.indexOf('\n');
  return start === -1 || start === end.length - 1 ? end : end.slice(start + 1);
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/**
 * What the SDK's reader could not take, for the log, in the worker's words: never the line itself, which may hold a
 * secret in any form (JSON.parse quotes the first characters of a line that is not JSON, so a secret's start; the
 * SDK quotes an answer to no request whole, secrets as keys included). Other errors are told redacted, cut short.
 */
function unreadableText(error: Error, secrets: readonly string[]): string {
  if (error instanceof SyntaxError) return 'a line of its stdout is not JSON (not shown: it may hold anything the server has)';
  const issue = schemaIssue(error);
  if (issue !== undefined) return `a line of its stdout is JSON but no JSON-RPC message: ${issue}`;
  if (error.message.startsWith('Received a response for an unknown message ID')) return 'it answered a request it was not sent, or one already answered (an id the worker is not waiting for)';
  return redactSecrets(error.message, secrets).slice(0, 300);
}

/** Why a start failed whose process still ran: an answer to `initialize` MCP does not allow is said as such, not as a schema dump. */
function startFailure(err: unknown): string {
  const issue = schemaIssue(err);
  return issue === undefined ? `it failed to start: ${errorText(err)}` : `its answer to initialize is not one MCP allows: ${issue}`;
}

/** Resolves when `stream` has ended (or was never there), or after `ms`. */
function stderrEnded(stream: Stream | null | undefined, ms: number): Promise<void> {
  if (stream === null || stream === undefined || (stream as { readableEnded?: boolean }).readableEnded === true) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    const done = (): void => {
      clearTimeout(timer);
      resolve();
    };
    stream.once('end', done);
    stream.once('close', done);
  });
}
