import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';

/** The protocol revision the bridge speaks to a server: the one without the `initialize` handshake. */
export const MODERN_REVISION = '2026-07-28';

/**
 * The servers found to speak only MCP 2026-07-28 (they refused the 2025-era
 * `initialize` with that revision as the one they speak), by their launch, over
 * stdio and HTTP alike: the pool keeps one launch object per server, so each
 * of its later instances starts bridged at once.
 */
export const MODERN_ONLY = new WeakSet<object>();

/** The `_meta` keys of MCP 2026-07-28 that carry, on every request, what `initialize` used to say once. */
const VERSION_KEY = 'io.modelcontextprotocol/protocolVersion';
const CLIENT_INFO_KEY = 'io.modelcontextprotocol/clientInfo';
const CAPABILITIES_KEY = 'io.modelcontextprotocol/clientCapabilities';
const SERVER_INFO_KEY = 'io.modelcontextprotocol/serverInfo';

/** Ids of the bridge's own requests: strings with this prefix, which the SDK's client (numeric ids) never uses. */
const OWN_ID = 'forge-era-';

/**
 * How long after a listen stream that had been open ends the bridge opens another (an upstream that restarted
 * is listened to again), doubling up to {@link RELISTEN_MAX_MS} while the streams end as soon as they open: an
 * upstream that ends each at once costs a request and a tool listing per 30 s, not one per second.
 */
const RELISTEN_MS = 1_000;
const RELISTEN_MAX_MS = 30_000;

type Message = Record<string, unknown> & { jsonrpc: '2.0' };
type Params = Record<string, unknown> & { _meta?: Record<string, unknown> };

/**
 * Lets the SDK 1.x client, which opens every connection with the 2025-era
 * `initialize` handshake, talk to a stdio server that speaks only MCP
 * 2026-07-28 (a server of the v2 SDK built with `legacy: 'reject'`). It sits
 * in the transport, between the client and the server's pipes:
 *
 * - `initialize` is answered here, from the server's `server/discover`; the
 *   client's `notifications/initialized` is not sent on, and a
 *   `subscriptions/listen` for tool-list changes goes instead, since in
 *   2026-07-28 a server sends `notifications/tools/list_changed` only to a
 *   subscription;
 * - every other request and notification of the client gets the per-request
 *   `_meta` (revision, client info, capabilities) the revision requires;
 * - `ping`, which 2026-07-28 removed, becomes a `server/discover`, so the
 *   pool's check that an instance still answers keeps working;
 * - a listen stream that had been open and ends (an HTTP upstream
 *   restarted) is opened again, and the client told the tools may have
 *   changed meanwhile.
 *
 * Everything else (results, progress, cancels, the list changes) passes
 * unchanged: those messages are the same in both revisions. The bridge
 * carries no bytes itself: over stdio it sits in the process's transport
 * (stdio-transport.ts), over HTTP in a transport of its own (modern-http-transport.ts).
 */
export class ModernEraBridge {
  readonly #toServer: (message: JSONRPCMessage) => Promise<void> | void;
  readonly #toClient: (message: JSONRPCMessage) => void;
  /** The bridge's own requests waiting for their answer; the listen request's answer (at its end) is dropped. */
  readonly #waiting = new Map<string, (answer: Message) => void>();
  #next = 0;
  /** What the client's `initialize` said of itself, stamped on each of its messages. */
  #stamp: Record<string, unknown> = { [VERSION_KEY]: MODERN_REVISION };
  /** The upstream acknowledged the listen stream now open: its end is worth a new one. */
  #listening = false;
  /** When the open stream was acknowledged, and the wait before the next one should it end. */
  #listenedAt = 0;
  #relistenMs = RELISTEN_MS;
  #relisten: NodeJS.Timeout | undefined;
  #closed = false;

  /**
   * @param toServer sends a message on; its promise (if any) rejects when the message could not be sent, and
   *   {@link fromClient} hands that rejection to the client's transport, as a send of its own would have failed.
   */
  constructor(toServer: (message: JSONRPCMessage) => Promise<void> | void, toClient: (message: JSONRPCMessage) => void) {
    this.#toServer = toServer;
    this.#toClient = toClient;
  }

  /** A message the client sends; resolves once it is sent on (as far as the server's side says). */
  async fromClient(message: JSONRPCMessage): Promise<void> {
    const m = message as Message;
    const method = typeof m.method === 'string' ? m.method : undefined;
    const isRequest = method !== undefined && 'id' in m;
    if (isRequest && method === 'initialize') return this.#initialize(m);
    if (isRequest && method === 'ping') return this.#ping(m);
    if (method === 'notifications/initialized') return this.#listen();
    // A response to a request of the server carries no _meta of ours.
    return this.#toServer((method === undefined ? m : this.#stamped(m)) as JSONRPCMessage);
  }

  /** Stops opening listen streams: the connection is ending. */
  close(): void {
    this.#closed = true;
    clearTimeout(this.#relisten);
  }

  /** A message the server sends. */
  fromServer(message: JSONRPCMessage): void {
    const m = message as Message;
    if (typeof m.id === 'string' && m.id.startsWith(OWN_ID) && !('method' in m)) {
      const answer = this.#waiting.get(m.id);
      this.#waiting.delete(m.id);
      answer?.(m);
      return;
    }
    // The first message of the listen stream: the client has no use for it.
    if (m.method === 'notifications/subscriptions/acknowledged') {
      this.#listening = true;
      this.#listenedAt = Date.now();
      return;
    }
    this.#toClient(message);
  }

  #stamped(m: Message): Message {
    const params = (typeof m.params === 'object' && m.params !== null ? m.params : {}) as Params;
    return { ...m, params: { ...params, _meta: { ...params._meta, ...this.#stamp } } };
  }

  /** Sends a request of the bridge's own; `onAnswer` gets the server's result or error message (undefined: none wanted). */
  async #request(method: string, params: Params, onAnswer?: (answer: Message) => void): Promise<void> {
    const id = `${OWN_ID}${(this.#next += 1)}`;
    this.#waiting.set(id, onAnswer ?? (() => undefined));
    try {
      await this.#toServer(this.#stamped({ jsonrpc: '2.0', id, method, params }) as JSONRPCMessage);
    } catch (err) {
      this.#waiting.delete(id);
      throw err;
    }
  }

  #initialize(m: Message): Promise<void> {
    const params = (m.params ?? {}) as { protocolVersion?: unknown; capabilities?: unknown; clientInfo?: unknown };
    this.#stamp = { [VERSION_KEY]: MODERN_REVISION, [CLIENT_INFO_KEY]: params.clientInfo, [CAPABILITIES_KEY]: params.capabilities ?? {} };
    return this.#request('server/discover', {}, (answer) => {
      const result = answer.result as { capabilities?: unknown; instructions?: unknown; _meta?: Record<string, unknown> } | undefined;
      if (result === undefined) return this.#toClient({ jsonrpc: '2.0', id: m.id, error: answer.error } as JSONRPCMessage);
      const serverInfo = result._meta?.[SERVER_INFO_KEY] ?? { name: 'unnamed', version: 'unknown' };
      this.#toClient({
        jsonrpc: '2.0',
        id: m.id,
        // The revision the client asked for, which it accepts: what it may send is the bridge's business from here on.
        result: { protocolVersion: params.protocolVersion, capabilities: result.capabilities ?? {}, serverInfo, ...(typeof result.instructions === 'string' ? { instructions: result.instructions } : {}) },
      } as JSONRPCMessage);
    });
  }

  #ping(m: Message): Promise<void> {
    return this.#request('server/discover', {}, (answer) =>
      this.#toClient((answer.result === undefined ? { jsonrpc: '2.0', id: m.id, error: answer.error } : { jsonrpc: '2.0', id: m.id, result: {} }) as JSONRPCMessage),
    );
  }

  /**
   * Opens the stream the server sends tool-list changes on; it stays open for the connection's life. A server
   * without it answers an error at once, dropped; one whose open stream ends gets a new one.
   */
  async #listen(): Promise<void> {
    if (this.#closed) return;
    this.#listening = false;
    await this.#request('subscriptions/listen', { notifications: { toolsListChanged: true } }, () => {
      if (!this.#listening || this.#closed) return;
      this.#listening = false;
      // A stream that stayed open a while was a good one: the next wait starts over.
      if (Date.now() - this.#listenedAt >= RELISTEN_MAX_MS) this.#relistenMs = RELISTEN_MS;
      const wait = this.#relistenMs;
      this.#relistenMs = Math.min(wait * 2, RELISTEN_MAX_MS);
      this.#relisten = setTimeout(() => {
        if (this.#closed) return;
        void this.#listen().catch(() => undefined);
        // What changed while no stream was open was not told: the client lists again.
        this.#toClient({ jsonrpc: '2.0', method: 'notifications/tools/list_changed' });
      }, wait);
      this.#relisten.unref();
    }).catch(() => undefined);
  }
}
