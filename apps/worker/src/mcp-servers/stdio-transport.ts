import { type ChildProcess, spawn } from 'node:child_process';
import type { PassThrough } from 'node:stream';
import { getDefaultEnvironment, StdioClientTransport, type StdioServerParameters } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { Outbox } from '../sandbox/framing.js';
import { AnswerLines } from './answer-lines.js';
import { GroupReaper } from './group-reaper.js';
import { ModernEraBridge } from './modern-era.js';
import { descriptorsOf, holdersOf, killEach, killGroup } from './process-tree.js';

/** How long a server's stdio may stay open after its process exited, to bring what it wrote last (see endsWithItsProcess). */
const EXIT_DRAIN_MS = 250;

/** How a process ended, as its `exit` event tells it: a status, or the signal that killed it. */
export interface ProcessEnd {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

/**
 * The SDK's transport with its spawn made visible, so a process that fails
 * `initialize` can still be killed by pid, and with its sends coalesced: the
 * SDK writes each message to the server's stdin on its own, a syscall and a
 * wake-up of the server each, while a worker under load sends many calls per
 * turn. They leave in one write at the end of the loop iteration (the
 * sandbox channel's Outbox). A send resolves once queued: what stdin buffers
 * is bounded by the calls in flight on the instance (`callsPerInstance`).
 */
export class SpawnAwareTransport extends StdioClientTransport {
  spawnedPid: number | undefined;
  /** How the process ended, once it has: a failed start says it (the SDK says only "Connection closed"). */
  exited: ProcessEnd | undefined;
  /** The group's reaper, started the moment the server has a pid (see group-reaper.ts). */
  reaper: GroupReaper | undefined;
  /** Set when the server closed its stdout while it ran on, and was ended for it (see {@link endsWithItsStdout}). */
  stdoutClosed = false;
  #outbox: Outbox | undefined;
  readonly #reaperShell: string | undefined;
  readonly #modern: boolean;
  /** Between the client and a server that speaks only MCP 2026-07-28 (see modern-era.ts); undefined for every other server. */
  #bridge: ModernEraBridge | undefined;

  /** Descriptors the process gets after its stdio, as 3, 4, …: a sandboxed server's pinned paths, for bubblewrap. */
  readonly #descriptors: readonly number[];

  /**
   * @param reaperShell the shell to run a group reaper in, or undefined where a PID namespace reaps.
   * @param modern whether the server speaks only MCP 2026-07-28, so the client's messages go through a {@link ModernEraBridge}.
   * @param maxMessageBytes the most one message of the server may take (see answer-lines.ts).
   */
  constructor(parameters: StdioServerParameters, reaperShell: string | undefined, modern: boolean, maxMessageBytes: number, descriptors: readonly number[] = []) {
    super(parameters);
    this.#descriptors = descriptors;
    this.#reaperShell = reaperShell;
    this.#modern = modern;
    // The SDK's reader, in a field TypeScript calls private (SDK pinned in package-lock.json), closes the
    // connection on an oversized message; ours drops that message and fails only its call (answer-lines.ts).
    const self = this as unknown as { _readBuffer?: unknown };
    if (self._readBuffer !== undefined) self._readBuffer = new AnswerLines(maxMessageBytes);
  }

  override async start(): Promise<void> {
    await (this.#descriptors.length === 0 ? super.start() : this.#spawnWithDescriptors());
    this.spawnedPid = this.pid ?? undefined;
    if (this.spawnedPid !== undefined && this.#reaperShell !== undefined) this.reaper = GroupReaper.start(this.#reaperShell, this.spawnedPid);
    // The SDK keeps its child in a field TypeScript calls private (SDK pinned in package-lock.json); were it
    // ever gone, sends would go one write each, through the SDK's own send.
    const child = (this as unknown as { _process?: ChildProcess })._process;
    const stdin = child?.stdin;
    if (stdin != null) this.#outbox = new Outbox((text) => stdin.write(text));
    if (child !== undefined) {
      endsWithItsProcess(child);
      endsWithItsStdout(child, () => (this.stdoutClosed = true));
      child.once('exit', (code, signal) => (this.exited = { code, signal }));
    }
    if (this.#modern) {
      // The client set its handler before it started the transport; the bridge goes in front of it.
      const toClient = this.onmessage;
      const bridge = new ModernEraBridge(
        (message) => void this.#write(message),
        (message) => toClient?.(message),
      );
      this.#bridge = bridge;
      this.onmessage = (message) => bridge.fromServer(message);
    }
  }

  /**
   * The SDK's start, with more descriptors than stdio: its spawn takes only
   * three. What it sets up is set up the same way, in the same fields, so
   * its send, close, pid and stderr work on this process as on its own
   * (SDK pinned in package-lock.json).
   */
  #spawnWithDescriptors(): Promise<void> {
    const sdk = this as unknown as SdkTransportFields;
    const params = sdk._serverParams;
    return new Promise((resolve, reject) => {
      const child = spawn(params.command, params.args ?? [], {
        env: { ...getDefaultEnvironment(), ...params.env },
        stdio: ['pipe', 'pipe', params.stderr ?? 'inherit', ...this.#descriptors],
        shell: false,
        ...(params.cwd === undefined ? {} : { cwd: params.cwd }),
      });
      sdk._process = child;
      child.on('error', (error) => {
        reject(error);
        this.onerror?.(error);
      });
      child.on('spawn', () => resolve());
      child.on('close', () => {
        sdk._process = undefined;
        this.onclose?.();
      });
      child.stdin?.on('error', (error) => this.onerror?.(error));
      child.stdout?.on('data', (chunk: Buffer) => {
        try {
          sdk._readBuffer.append(chunk);
          sdk.processReadBuffer();
        } catch (error) {
          this.onerror?.(error instanceof Error ? error : new Error(String(error)));
          this.close().catch(() => undefined);
        }
      });
      child.stdout?.on('error', (error) => this.onerror?.(error));
      if (sdk._stderrStream !== null && child.stderr !== null) child.stderr.pipe(sdk._stderrStream);
    });
  }

  override send(message: JSONRPCMessage): Promise<void> {
    if (this.#bridge === undefined) return this.#write(message);
    return this.#bridge.fromClient(message);
  }

  #write(message: JSONRPCMessage): Promise<void> {
    if (this.#outbox === undefined || this.pid === null) return super.send(message);
    this.#outbox.send(JSON.stringify(message));
    return Promise.resolve();
  }

  override async close(): Promise<void> {
    // What this turn queued goes before stdin ends (a write after end would fail).
    this.#outbox?.flush();
    this.#outbox = undefined;
    this.#bridge?.close();
    await super.close();
  }
}

/** The fields of the SDK's transport its start sets up (TypeScript calls them private). */
interface SdkTransportFields {
  _process: ChildProcess | undefined;
  readonly _serverParams: StdioServerParameters;
  readonly _readBuffer: { append(chunk: Buffer): void };
  readonly _stderrStream: PassThrough | null;
  processReadBuffer(): void;
}

/**
 * Makes the end of the server's process the end of its stdio. The SDK learns
 * that a server has gone when its stdio closes, not when it exits; a helper
 * the server left running with its stdout (a daemon that did not close it, in
 * a session of its own, so the group kill misses it) kept the instance
 * "alive" with no process behind it: calls hung until their timeout, no
 * replacement came, and shutdown waited out its grace. Once the process has
 * exited, its stdio has {@link EXIT_DRAIN_MS} to bring what it wrote last;
 * then whoever else holds those pipes is killed and the worker's ends are
 * closed, which ends the instance as any exit does.
 */
function endsWithItsProcess(child: ChildProcess): void {
  // Read now, while the process lives: its descriptors 0–2 are the pipes anyone holding them shares.
  const pipes = child.pid === undefined ? new Set<string>() : descriptorsOf(child.pid, [0, 1, 2]);
  let closed = false;
  child.once('close', () => (closed = true));
  const afterExit = (): void => {
    setTimeout(() => {
      if (closed) return;
      killEach(holdersOf(pipes, process.pid));
      child.stdin?.destroy();
      child.stdout?.destroy();
      child.stderr?.destroy();
    }, EXIT_DRAIN_MS).unref();
  };
  if (child.exitCode !== null || child.signalCode !== null) afterExit();
  else child.once('exit', afterExit);
}

/**
 * Makes the end of the server's stdout the end of its process. A server
 * answers on its stdout; one that closes it and runs on can answer nothing
 * more, yet the SDK waits for the process to exit as well: its calls hung to
 * their timeout (ended EXECUTION_TIMEOUT, blaming the tool), and calls sent
 * meanwhile went to it. A stdout that ends without the process exiting within
 * {@link EXIT_DRAIN_MS} (an exit closes it too, a moment before its `exit`
 * event) has its group killed, which ends the instance as any exit does:
 * `MCP_SERVER_LOST` for its calls, a replacement.
 */
function endsWithItsStdout(child: ChildProcess, onClosedAlive: () => void): void {
  const exited = (): boolean => child.exitCode !== null || child.signalCode !== null;
  child.stdout?.once('end', () => {
    setTimeout(() => {
      if (exited() || child.pid === undefined) return;
      onClosedAlive();
      killGroup(child.pid);
    }, EXIT_DRAIN_MS).unref();
  });
}
