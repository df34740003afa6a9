import { StreamableHTTPClientTransport, type StreamableHTTPClientTransportOptions } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { FetchLike } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage, RequestId } from '@modelcontextprotocol/sdk/types.js';
import { requestIdsOf } from './post-body.js';

/** What the transport's fetch saw of the upstream's answers to the session's requests. */
interface SessionAnswers {
  /** The JSON-RPC ids of the `tools/call` requests answered 404. */
  readonly notFound: Set<RequestId>;
  /** A request after `initialize` was answered (not 202, which only accepts a notification). */
  answered: boolean;
}

/**
 * The SDK's StreamableHTTPClientTransport, noting what the worker must know
 * of an upstream that ends a session. MCP's Streamable HTTP: the upstream
 * then answers every request carrying the session's id with HTTP 404, and has
 * not processed it. The SDK only fails such a request, and the session's end
 * then fails every call in flight alike, those that may have run with those
 * that did not. Noted here:
 *
 * - which `tools/call` requests were answered 404: those calls did not run,
 *   and may be sent on a new session ({@link notRun});
 * - whether the upstream answered a request of the session before
 *   ({@link answered}): one that forgets a session before answering anything
 *   on it keeps no session at all (a load balancer without session affinity,
 *   say), which is a failure of the server rather than a session's end.
 */
export class SessionHttpTransport extends StreamableHTTPClientTransport {
  readonly #answers: SessionAnswers;
  /** The JSON-RPC id each `tools/call` was sent with, by its arguments: an object only that call holds (see {@link notRun}). */
  readonly #sentAs = new WeakMap<object, RequestId>();

  constructor(url: URL, options: StreamableHTTPClientTransportOptions & { fetch: FetchLike }) {
    const answers: SessionAnswers = { notFound: new Set(), answered: false };
    super(url, { ...options, fetch: noting(options.fetch, answers) });
    this.#answers = answers;
  }

  override send(message: JSONRPCMessage | JSONRPCMessage[], options?: Parameters<StreamableHTTPClientTransport['send']>[1]): Promise<void> {
    if (!Array.isArray(message) && 'method' in message && message.method === 'tools/call' && 'id' in message) {
      const args = message.params?.arguments;
      if (typeof args === 'object' && args !== null) this.#sentAs.set(args, message.id);
    }
    return super.send(message, options);
  }

  /**
   * Whether the upstream answered the `tools/call` whose arguments were `args` with 404: it did not run it. The SDK
   * sends a request's arguments as the object it was given, so a call that passes an object of its own finds its
   * request by it.
   */
  notRun(args: object): boolean {
    const id = this.#sentAs.get(args);
    return id !== undefined && this.#answers.notFound.has(id);
  }

  /** Whether the upstream answered a request of this session beyond `initialize`. */
  get answered(): boolean {
    return this.#answers.answered;
  }
}

/** `base`, noting in `answers` what the upstream answered to the requests that carried a session id. */
function noting(base: FetchLike, answers: SessionAnswers): FetchLike {
  return async (url, init) => {
    const response = await base(url, init);
    const notFound = response.status === 404;
    if (!notFound && (answers.answered || !response.ok || response.status === 202)) return response;
    if (init?.method !== 'POST' || !new Headers(init.headers).has('mcp-session-id')) return response;
    if (!notFound) answers.answered = true;
    else for (const id of requestIdsOf(init.body, 'tools/call')) answers.notFound.add(id);
    return response;
  };
}
