import { StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { FetchLike, Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { EventSourceParserStream } from 'eventsource-parser/stream';
import { badAnswer } from './answer-lines.js';
import { MODERN_REVISION, ModernEraBridge } from './modern-era.js';
import { type ParamHeader, paramHeadersOf, standardHeaders } from './modern-http-headers.js';

type Message = Record<string, unknown> & { jsonrpc: '2.0' };
type RequestId = string | number;

/** The request whose stream stays open for the connection's life, carrying list changes: its end is no failure. */
const LISTEN = 'subscriptions/listen';

/**
 * The SDK 1.x client's transport to a Streamable HTTP upstream that speaks
 * only MCP 2026-07-28 (a server of the v2 SDK built with `legacy: 'reject'`).
 * That revision has no session and no `initialize`: each request is a POST of
 * its own, carrying in its `_meta` what `initialize` used to say and, in
 * headers, its revision, method and name (modern-http-headers.ts). The
 * messages are translated by the same {@link ModernEraBridge} as over stdio;
 * this class carries them:
 *
 * - a request's POST is answered with JSON or with an SSE stream of its
 *   progress and its answer; an error status with the request's JSON-RPC
 *   error in its body is that answer;
 * - a cancel (and the SDK's timeout) aborts the request's POST, which is how
 *   2026-07-28 cancels: the server sees the request's connection close;
 * - the tool-list listen stream is a long POST of its own;
 * - a failure of the upstream itself (cannot be reached, an error status
 *   without a JSON-RPC answer, a stream that breaks off before its answer)
 *   goes to `onerror` as the SDK's own transport reports it, so the instance
 *   ends and the pool replaces it.
 *
 * The `fetch` given is the bounded one (bounded-fetch.ts): no answer can make
 * the worker hold more than one message's bound.
 */
export class ModernHttpTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  /** None: 2026-07-28 has no sessions. */
  readonly sessionId = undefined;

  readonly #url: URL;
  readonly #headers: Readonly<Record<string, string>>;
  readonly #fetch: FetchLike;
  readonly #bridge: ModernEraBridge;
  /** The POST of each request still waiting for its answer, to abort on a cancel or on close. */
  readonly #inFlight = new Map<RequestId, AbortController>();
  /** The `tools/list` requests in flight: their answers tell which arguments a tool sends as headers. */
  readonly #listing = new Set<RequestId>();
  /** By tool name, the arguments its calls send as `Mcp-Param-*` headers (from the tools' input schemas). */
  readonly #paramHeaders: Map<string, readonly ParamHeader[]>;
  #closed = false;

  /**
   * @param paramHeaders the tools' header declarations, filled from each `tools/list` answer: shared by the
   *   connections to one upstream, since the pool lists the tools on one of them and calls them on any.
   */
  constructor(url: URL, headers: Readonly<Record<string, string>>, fetch: FetchLike, paramHeaders = new Map<string, readonly ParamHeader[]>()) {
    this.#url = url;
    this.#headers = headers;
    this.#fetch = fetch;
    this.#paramHeaders = paramHeaders;
    this.#bridge = new ModernEraBridge(
      (message) => this.#post(message),
      (message) => this.#deliver(message),
    );
  }

  async start(): Promise<void> {
    // Nothing to open: each message is a request of its own.
  }

  send(message: JSONRPCMessage): Promise<void> {
    if (this.#closed) return Promise.reject(new Error('Not connected'));
    return this.#bridge.fromClient(message);
  }

  /** Nothing to terminate (no session); the instance's close ends the streams. */
  async terminateSession(): Promise<void> {}

  close(): Promise<void> {
    if (this.#closed) return Promise.resolve();
    this.#closed = true;
    this.#bridge.close();
    for (const controller of this.#inFlight.values()) controller.abort();
    this.#inFlight.clear();
    this.onclose?.();
    return Promise.resolve();
  }

  /** A message from the upstream, through the bridge to the client. */
  #deliver(message: Message): void {
    if (this.#closed) return;
    this.onmessage?.(message as JSONRPCMessage);
  }

  /** A message from the upstream, to the bridge; a `tools/list` answer also updates the header declarations. */
  #received(message: Message): void {
    // An answer that is neither a result nor an error is one the client would drop, its call left to time out.
    const bad = badAnswer(message);
    if (bad !== undefined) message = bad;
    const id = message.id as RequestId | undefined;
    if (id !== undefined && !('method' in message) && this.#listing.delete(id)) {
      const tools = (message.result as { tools?: unknown } | undefined)?.tools;
      if (Array.isArray(tools)) {
        for (const tool of tools as { name?: unknown; inputSchema?: unknown }[]) {
          if (typeof tool?.name === 'string') this.#paramHeaders.set(tool.name, paramHeadersOf(tool.inputSchema));
        }
      }
    }
    this.#bridge.fromServer(message as JSONRPCMessage);
  }

  async #post(message: Message): Promise<void> {
    if (this.#closed) throw new Error('Not connected');
    const method = typeof message.method === 'string' ? message.method : undefined;
    if (method === 'notifications/cancelled') {
      // The revision's cancel: the request's connection closes, and the server aborts its handler.
      const requestId = (message.params as { requestId?: RequestId } | undefined)?.requestId;
      if (requestId !== undefined) this.#abort(requestId);
      return;
    }
    const id = method !== undefined && 'id' in message ? (message.id as RequestId) : undefined;
    const params = message.params as { name?: unknown } | undefined;
    const declared = method === 'tools/call' && typeof params?.name === 'string' ? this.#paramHeaders.get(params.name) : undefined;
    // Set over the file's headers whatever their case: a header of the file named like one of these would make the upstream refuse the request.
    const headers = new Headers(this.#headers);
    const own = method === undefined ? { 'mcp-protocol-version': MODERN_REVISION } : standardHeaders(MODERN_REVISION, method, message.params, declared);
    for (const [name, value] of Object.entries({ ...own, 'content-type': 'application/json', accept: 'application/json, text/event-stream' })) headers.set(name, value);
    const controller = new AbortController();
    if (id !== undefined) {
      this.#inFlight.set(id, controller);
      if (method === 'tools/list') this.#listing.add(id);
    }
    let streaming = false;
    try {
      const response = await this.#fetch(this.#url, { method: 'POST', headers, body: JSON.stringify(message), signal: controller.signal });
      if (id === undefined) {
        // A notification or a response: whatever the upstream answers (202, or a refusal) is nothing the client waits for.
        await response.body?.cancel().catch(() => undefined);
        return;
      }
      streaming = await this.#answer(response, id, method, controller);
    } catch (err) {
      if (controller.signal.aborted) return;
      const error = err instanceof Error ? err : new Error(String(err));
      this.onerror?.(error);
      throw error;
    } finally {
      if (id !== undefined && !streaming) this.#settled(id, controller);
    }
  }

  /** The request is answered or given up: its POST no longer needs aborting. */
  #settled(id: RequestId, controller: AbortController): void {
    if (this.#inFlight.get(id) === controller) this.#inFlight.delete(id);
    this.#listing.delete(id);
  }

  /**
   * Reads a request's answer: JSON, an SSE stream of its messages, or an error status carrying its JSON-RPC error.
   *
   * @returns true when the answer comes on a stream, read on from here (the POST resolves once the stream is open).
   */
  async #answer(response: Response, id: RequestId, method: string | undefined, controller: AbortController): Promise<boolean> {
    const type = (response.headers.get('content-type') ?? '').split(';')[0]?.trim().toLowerCase();
    if (!response.ok) {
      const text = await response.text().catch(() => '');
      const answer = jsonAnswerFor(text, id);
      if (answer === undefined) throw new StreamableHTTPError(response.status, `Error POSTing to endpoint: ${text}`);
      this.#received(answer);
      return false;
    }
    if (type === 'application/json') {
      const body = (await response.json());
      for (const m of Array.isArray(body) ? body : [body]) if (isMessage(m)) this.#fromPost(m, id);
      return false;
    }
    if (type !== 'text/event-stream' || response.body === null) {
      await response.body?.cancel().catch(() => undefined);
      throw new StreamableHTTPError(response.status, `Unexpected content type: ${type === '' ? 'none' : type}`);
    }
    void this.#stream(response.body, id, method, controller);
    return true;
  }

  /** Reads a request's SSE stream to its answer; its end or break is reported here, the POST having resolved. */
  async #stream(body: ReadableStream<Uint8Array>, id: RequestId, method: string | undefined, controller: AbortController): Promise<void> {
    let answered = false;
    try {
      for await (const data of sseData(body)) {
        let parsed: unknown;
        try {
          parsed = JSON.parse(data);
        } catch {
          continue;
        }
        if (isMessage(parsed) && this.#fromPost(parsed, id)) {
          answered = true;
          break;
        }
      }
    } catch (err) {
      if (this.#closed || controller.signal.aborted) return;
      if (method !== LISTEN) {
        this.onerror?.(new Error(`SSE stream disconnected: ${err instanceof Error ? err.message : String(err)}`));
        return;
      }
    } finally {
      this.#settled(id, controller);
    }
    if (answered || this.#closed || controller.signal.aborted) return;
    if (method === LISTEN) {
      // The listen stream ended (the upstream restarted, say): the bridge opens another.
      this.#received({ jsonrpc: '2.0', id, error: { code: -32000, message: 'the upstream ended the listen stream' } });
      return;
    }
    // The worker's fetch (bounded-fetch.ts) answers a request whose stream ended without its answer itself, with an
    // error event that fails the call at once; this is for a fetch that does not.
    this.onerror?.(new Error('SSE stream disconnected: the upstream ended the stream before it answered'));
  }

  /**
   * A message on the answer to request `id`: its progress, the server's requests, and its answer. An answer
   * for any other id is dropped: one request's POST cannot settle another request.
   *
   * @returns whether it was the request's answer.
   */
  #fromPost(message: Message, id: RequestId): boolean {
    const isResponse = !('method' in message);
    if (isResponse && message.id !== id) return false;
    this.#received(message);
    return isResponse;
  }

  #abort(id: RequestId): void {
    this.#inFlight.get(id)?.abort();
    this.#inFlight.delete(id);
  }
}

/**
 * The `data` of each SSE event of type `message` (or untyped), parsed by the
 * parser the SDK's own transport uses; an event the stream ends in the middle
 * of is dropped. Leaving the loop early cancels the stream.
 */
export async function* sseData(body: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  const events = body.pipeThrough(new TextDecoderStream()).pipeThrough(new EventSourceParserStream());
  for await (const event of events) if (event.event === undefined || event.event === 'message') yield event.data;
}

/** The JSON-RPC answer for `id` an error status carries in its body, if it carries one. */
function jsonAnswerFor(text: string, id: RequestId): Message | undefined {
  try {
    const parsed: unknown = JSON.parse(text);
    return isMessage(parsed) && parsed.id === id && 'error' in parsed ? parsed : undefined;
  } catch {
    return undefined;
  }
}

function isMessage(value: unknown): value is Message {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && (value as { jsonrpc?: unknown }).jsonrpc === '2.0';
}
