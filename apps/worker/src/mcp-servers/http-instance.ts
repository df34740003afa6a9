import { McpServerLostError, UnavailableError } from '@forge-fleet/shared';
import { StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { type CallToolResult, McpError, ErrorCode as McpErrorCode } from '@modelcontextprotocol/sdk/types.js';
import type { McpHttpLaunch } from './pool-options.js';
import { redactSecrets, revealAll, secretForms } from './secret-value.js';
import { boundedFetch } from './bounded-fetch.js';
import { MODERN_ONLY, MODERN_REVISION } from './modern-era.js';
import type { ParamHeader } from './modern-http-headers.js';
import { ModernHttpTransport } from './modern-http-transport.js';
import { SessionExpiredError } from './session-expired.js';
import { SessionHttpTransport } from './session-transport.js';
import { answeredRevision, isMcpError, type McpCallOptions, refusedRevisions, revisionRefusal, UpstreamInstance, type UpstreamHooks } from './upstream-instance.js';

/** How long ending a session may wait for the upstream to answer its DELETE: one that hangs must not hold up a worker's shutdown. */
const TERMINATE_TIMEOUT_MS = 5_000;

/** How long the ping that asks whether a session outlived one request's failed connection may take. */
const SESSION_CHECK_MS = 5_000;

/** The `x-mcp-header` declarations of a 2026-07-28 upstream's tools, by its launch: one for all the pool's connections to it. */
const PARAM_HEADERS = new WeakMap<McpHttpLaunch, Map<string, readonly ParamHeader[]>>();

/**
 * One MCP session with a Streamable HTTP upstream, through the official SDK's
 * client and StreamableHTTPClientTransport. The pool treats it as it treats a
 * process: `min`/`max`/`callsPerInstance` count sessions, a `perCaller`
 * caller gets a session of its own, and a session that the upstream loses
 * (the connection drops, a stream breaks off, or it cannot be reached) ends,
 * so that the pool replaces it with its restart backoff. A session the
 * upstream ended (it answers 404 to its id: an idle timeout, a restart) ends
 * as expected, no failure of the server, and a call it answered so did not
 * run: it fails with SessionExpiredError, which may be sent again on a new
 * session (see session-transport.ts for what tells these apart).
 * Closing it terminates the session with a DELETE; nothing is killed.
 *
 * An upstream that speaks only MCP 2026-07-28 refuses the SDK's 2025-era
 * `initialize`; naming that revision, it is served over the transport of that
 * revision instead (modern-http-transport.ts), where an "instance" is the
 * worker's connection to it, with no session at the upstream.
 *
 * The headers are secrets: they go into requests and nowhere else. Every
 * message this class makes is built from the status code and the fleet's own
 * words, with any header value that might still appear redacted, and no raw
 * SDK error travels as a `cause` (its text may quote the upstream's answer).
 */
export class HttpMcpInstance extends UpstreamInstance {
  readonly #transport: SessionHttpTransport | ModernHttpTransport;
  /** The URL for people: origin and path, without a query that might carry a key. */
  readonly #where: string;
  /** Why the session was lost, once it was. */
  #lostDetail = '';
  /** `initialize` was answered: from now on a failed connection ends the session. */
  #open = false;
  /** A ping asks whether the session outlived a request's failure (see #check). */
  #checking = false;

  private constructor(server: string, launch: McpHttpLaunch, hooks: UpstreamHooks, modern: boolean) {
    super(server, hooks);
    const url = new URL(launch.url);
    this.#where = `${url.origin}${url.pathname}`;
    // The one place the values are revealed: into the requests' headers.
    const headers = revealAll(launch.headers);
    // The header values and their longer parts, longest first, removed from every message.
    this.secrets = secretForms(Object.values(headers));
    // Bounded answers (bounded-fetch.ts): an upstream's one huge answer fails its call, not the worker.
    const fetch = boundedFetch(launch.maxMessageBytes);
    this.#transport = modern ? new ModernHttpTransport(url, headers, fetch, paramHeadersFor(launch)) : new SessionHttpTransport(url, { requestInit: { headers }, fetch });
    // Set before connect, which chains its own handler after this one: the transport reports here what it does not throw.
    this.#transport.onerror = (err) => this.#onTransportError(err);
  }

  /**
   * Opens a session: `initialize` and its answer.
   *
   * @throws UnavailableError naming the server and URL (never a header value) when the upstream cannot be reached,
   *   refuses the request (a 401 for wrong credentials, say), or does not answer within `launch.startupTimeoutMs`.
   */
  static async start(options: { server: string; launch: McpHttpLaunch } & UpstreamHooks): Promise<HttpMcpInstance> {
    const { server, launch } = options;
    const modern = MODERN_ONLY.has(launch);
    const instance = new HttpMcpInstance(server, launch, options, modern);
    try {
      await instance.client.connect(instance.#transport, { timeout: launch.startupTimeoutMs, ...(options.startSignal === undefined ? {} : { signal: options.startSignal }) });
    } catch (err) {
      instance.expected = true;
      await instance.client.close().catch(() => undefined);
      if (!modern && refusedRevisionsOf(err)?.includes(MODERN_REVISION) === true) {
        // Known from here on: the pool's next sessions with this upstream start in its revision, without a refused handshake first.
        MODERN_ONLY.add(launch);
        return HttpMcpInstance.start(options);
      }
      const reason = isMcpError(err, McpErrorCode.RequestTimeout) ? `it did not answer initialize within ${launch.startupTimeoutMs} ms` : instance.#startFailure(err);
      throw new UnavailableError(reason, { what: `MCP server '${server}' (${instance.#where})` });
    }
    // Empty for a session this object closed; a session the upstream ended (expected too) says so.
    instance.client.onclose = () => instance.markEnded(instance.#lostDetail);
    instance.#open = true;
    return instance;
  }

  override get id(): string {
    if (this.#transport instanceof ModernHttpTransport) return `${MODERN_REVISION} connection to ${this.#where}`;
    const session = this.#transport.sessionId;
    // A prefix only: to some upstreams a session id is as good as a credential.
    return `${session === undefined ? 'stateless session' : `session ${session.slice(0, 8)}…`} at ${this.#where}`;
  }

  override get pid(): undefined {
    return undefined;
  }

  /** Terminates the session (DELETE, bounded by a timeout; an upstream that does not support it answers 405), then drops the connection. */
  override async close(): Promise<void> {
    this.expected = true;
    if (!this.alive) return;
    const ended = new Promise<void>((resolve) => this.once('exit', () => resolve()));
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<void>((resolve) => (timer = setTimeout(resolve, TERMINATE_TIMEOUT_MS)));
    await Promise.race([this.#transport.terminateSession().catch(() => undefined), timeout]);
    clearTimeout(timer);
    // Aborts whatever is still open, a DELETE that timed out too.
    await this.client.close().catch(() => undefined);
    await ended;
  }

  /** An upstream session that stopped answering: terminated as far as the upstream still listens, not waited for. */
  override abandon(): void {
    void this.close();
  }

  /**
   * {@link UpstreamInstance.callTool}, telling a call that the upstream answered 404 to its session id (the session
   * ended) from one that may have run: the first fails with SessionExpiredError instead of McpServerLostError.
   */
  override async callTool(name: string, args: Record<string, unknown>, options: McpCallOptions): Promise<CallToolResult> {
    const transport = this.#transport;
    if (!(transport instanceof SessionHttpTransport)) return super.callTool(name, args, options);
    // An object only this call holds: the transport finds the call's request by it.
    const sent = { ...args };
    try {
      return await super.callTool(name, sent, options);
    } catch (err) {
      if (err instanceof McpServerLostError && transport.notRun(sent)) throw new SessionExpiredError(options.label ?? name, this.server, this.id, { cause: err });
      throw err;
    }
  }

  protected override lost(toolName: string, cause?: unknown, answerCut?: string): McpServerLostError {
    // A request whose connection failed while the session lives: its own answer broke off (the session is checked, see #onTransportError).
    const cut = answerCut ?? (cause !== undefined && this.alive && !unreachable(cause) ? this.describe(cause) : undefined);
    return new McpServerLostError(toolName, this.server, this.id, { ...(cause === undefined ? {} : { cause: this.causeOf(cause) }), ...(cut === undefined ? {} : { answerCut: cut }) });
  }

  protected override connectionFailed(err: unknown): boolean {
    return sessionIsGone(err);
  }

  protected override describe(err: unknown): string {
    return this.#redact(describeHttpFailure(err));
  }

  protected override causeOf(err: unknown): Error {
    return new Error(this.describe(err));
  }

  #startFailure(err: unknown): string {
    if (err instanceof StreamableHTTPError && (err.code === 401 || err.code === 403)) {
      return `it refused the session with HTTP ${err.code}; check the credentials in its headers (the values are not shown)`;
    }
    const revisions = refusedRevisionsOf(err);
    if (revisions !== undefined) return revisionRefusal(revisions);
    const answered = answeredRevision(err);
    if (answered !== undefined) return answered;
    if (err instanceof StreamableHTTPError && err.code !== undefined && err.code > 0) return `it answered initialize with HTTP ${err.code}`;
    // It was reached, and answered with an error of its own (redacted, as every message is): not a network failure.
    if (err instanceof McpError && err.code !== (McpErrorCode.ConnectionClosed as number)) return `it refused the handshake: it answered initialize with ${this.describe(err)}`;
    // Reached, its answer failed on the way (headers too large, the connection broken off in the middle).
    if (networkCode(err) !== undefined && !unreachable(err)) return `its answer to initialize failed: ${this.describe(err)}`;
    return `it cannot be reached: ${this.describe(err)}`;
  }

  /**
   * A connection or stream that failed for good ends the session: its calls can no longer be answered. One that
   * failed for one request (its answer broke off, its headers were too large, a proxy dropped it) proves nothing of
   * the session, which other calls are using: it is asked with a ping, and ends only if that fails too.
   */
  #onTransportError(err: Error): void {
    // Before the session is open, `start` sees the same failure as its connect's rejection.
    if (!this.#open || this.expected || !this.alive || !sessionIsGone(err)) return;
    if (this.#upstreamEnded(err)) {
      // The session's end, not a failure of the server: the pool replaces it without counting it towards a crash loop.
      this.expected = true;
      this.#lostDetail = 'the upstream ended the session: it answered HTTP 404 to its session id';
    } else if (!unreachable(err) && !(err instanceof StreamableHTTPError)) {
      this.#check(err);
      return;
    } else {
      this.#lostDetail = `the session was lost: ${this.describe(err)}`;
    }
    void this.client.close();
  }

  /** Asks the session whether it still answers after `err`, once at a time; ends it when it does not. */
  #check(err: Error): void {
    if (this.#checking) return;
    this.#checking = true;
    void this.ping(SESSION_CHECK_MS).then((answers) => {
      this.#checking = false;
      if (answers || this.expected || !this.alive) return;
      this.#lostDetail = `the session was lost: ${this.describe(err)}, and it did not answer a ping after that`;
      void this.client.close();
    });
  }

  /**
   * Whether `err` is the upstream's 404 to the session's id, after it answered a request of the session: MCP's
   * way of ending a session. One that forgets a session before answering anything on it keeps none, and fails as
   * before: else the pool would open sessions with it without end, never backing off (each new one is listed).
   */
  #upstreamEnded(err: Error): boolean {
    const transport = this.#transport;
    return err instanceof StreamableHTTPError && err.code === 404 && transport instanceof SessionHttpTransport && transport.sessionId !== undefined && transport.answered;
  }

  #redact(text: string): string {
    return redactSecrets(text, this.secrets);
  }
}

function paramHeadersFor(launch: McpHttpLaunch): Map<string, readonly ParamHeader[]> {
  let found = PARAM_HEADERS.get(launch);
  if (found === undefined) PARAM_HEADERS.set(launch, (found = new Map<string, readonly ParamHeader[]>()));
  return found;
}

/**
 * Whether a transport failure means the session can no longer be used: the
 * upstream cannot be reached (fetch's TypeError), forgot the session (404, as
 * after a restart), or a stream broke off and could not be resumed.
 */
function sessionIsGone(err: unknown): boolean {
  if (err instanceof StreamableHTTPError) return err.code === 404;
  if (err instanceof TypeError) return true;
  if (!(err instanceof Error)) return false;
  // The transport reports broken SSE streams only as these messages (SDK 1.32 streamableHttp.js).
  return /^(SSE stream disconnected|Failed to reconnect SSE stream|Maximum reconnection attempts)/.test(err.message);
}

/** A failure in the fleet's words: the status code rather than the upstream's body, the network error's code. */
function describeHttpFailure(err: unknown): string {
  if (err instanceof StreamableHTTPError) {
    const status = err.code;
    if (status === undefined || status <= 0) return err.message;
    if (status === 401 || status === 403) return `the upstream answered HTTP ${status}: it refused the worker's credentials; check the credentials in the server's headers (the values are not shown)`;
    // Not followed: the request's headers (its credentials) would go wherever the upstream points.
    if (status >= 300 && status < 400) return `the upstream answered HTTP ${status}, a redirect, which the worker does not follow (the headers would go to another address): set the server's url to where it leads`;
    return `the upstream answered HTTP ${status}`;
  }
  const code = networkCode(err);
  if (code !== undefined) return `${NETWORK_FAILURES[code] ?? (err as Error).message} (${code})`;
  return err instanceof Error ? err.message : String(err);
}

/** What fetch's network failures mean, by the code of its error's cause. */
const NETWORK_FAILURES: Readonly<Record<string, string>> = Object.freeze({
  ECONNREFUSED: 'the connection was refused',
  ENOTFOUND: 'its host name did not resolve',
  EAI_AGAIN: 'its host name did not resolve',
  EHOSTUNREACH: 'its host is unreachable',
  ENETUNREACH: 'its network is unreachable',
  UND_ERR_CONNECT_TIMEOUT: 'the connection timed out',
  ECONNRESET: 'the connection was reset',
  EPIPE: 'the connection broke off',
  UND_ERR_SOCKET: 'the connection broke off',
  UND_ERR_HEADERS_OVERFLOW: "its answer's headers were larger than the worker takes (16 KiB)",
  UND_ERR_HEADERS_TIMEOUT: "its answer's headers did not come in time",
  UND_ERR_BODY_TIMEOUT: 'its answer stalled',
});

/** The failures of fetch that reach no upstream at all (none of its requests got to it): no address, no connection, no TLS. */
function unreachable(err: unknown): boolean {
  const code = networkCode(err);
  if (code === undefined) return false;
  return ['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EAI_FAIL', 'EHOSTUNREACH', 'ENETUNREACH', 'EHOSTDOWN', 'UND_ERR_CONNECT_TIMEOUT'].includes(code) || /CERT|TLS|SSL/.test(code);
}

/** The code of a fetch failure's cause (`ECONNREFUSED`, `UND_ERR_SOCKET`), or undefined for anything else. */
function networkCode(err: unknown): string | undefined {
  if (!(err instanceof TypeError)) return undefined;
  const cause: unknown = err.cause;
  if (!(cause instanceof Error)) return undefined;
  const code = (cause as NodeJS.ErrnoException).code ?? ((cause as { errors?: unknown[] }).errors?.[0] as NodeJS.ErrnoException | undefined)?.code;
  return typeof code === 'string' ? code : undefined;
}

/**
 * The revisions an upstream that refused the worker's revision says it
 * speaks: from the JSON-RPC error the SDK's transport quotes after its own
 * words on a 400 (`Error POSTing to endpoint: {...}`), or from the error
 * answer of a 2026-07-28 upstream's discovery; undefined for any other
 * failure. Only revision strings are taken from that answer.
 */
function refusedRevisionsOf(err: unknown): string[] | undefined {
  if (err instanceof McpError) return refusedRevisions(err.code, err.data);
  if (!(err instanceof StreamableHTTPError) || err.code !== 400) return undefined;
  const message = err.message;
  const start = message.indexOf('{');
  if (start < 0) return undefined;
  try {
    const body = JSON.parse(message.slice(start)) as { error?: { code?: unknown; data?: unknown } };
    return refusedRevisions(body.error?.code, body.error?.data);
  } catch {
    return undefined;
  }
}
