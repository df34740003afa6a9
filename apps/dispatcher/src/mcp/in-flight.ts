import { createHash } from 'node:crypto';

/**
 * The `tools/call` requests this process is serving, so that a
 * `notifications/cancelled` can find them. In stateless Streamable HTTP every
 * POST gets its own server and transport: the cancellation arrives on another
 * request than the call it names, so the SDK's per-server bookkeeping never
 * sees both. Requests are keyed by who sent them (a hash of the bearer token,
 * or the dev-mode task header, and of the `Mcp-Session-Id` the client was
 * given at `initialize` and sends with every request) and their JSON-RPC id,
 * which a client keeps unique among its own requests — but only its own:
 * every official client numbers its requests from 0, so agents sharing a
 * token share ids. A cancellation that finds more than one request under its
 * key (clients of one token that keep no session id) cancels none of them,
 * rather than another agent's call: such a client cancels by hanging up.
 */
export class InFlightCalls {
  readonly #requests = new Map<string, Set<AbortController>>();

  /** The key of a client's requests: the token it authenticates with and its session id (hashed, never kept). */
  static clientOf(headers: { authorization?: string | undefined; 'x-forge-task'?: string | string[] | undefined; 'mcp-session-id'?: string | string[] | undefined }): string {
    const task = headers['x-forge-task'];
    const who = headers.authorization ?? `anonymous:${Array.isArray(task) ? task.join(',') : (task ?? '')}`;
    const session = headers['mcp-session-id'];
    return createHash('sha256')
      .update(`${who}\u0000${Array.isArray(session) ? session.join(',') : (session ?? '')}`)
      .digest('base64url');
  }

  /** Registers a request; `controller` aborts when the client cancels it. Returns the unregistration. */
  add(client: string, requestId: string | number, controller: AbortController): () => void {
    const key = InFlightCalls.#key(client, requestId);
    let set = this.#requests.get(key);
    if (set === undefined) this.#requests.set(key, (set = new Set()));
    set.add(controller);
    return () => {
      set.delete(controller);
      if (set.size === 0 && this.#requests.get(key) === set) this.#requests.delete(key);
    };
  }

  /**
   * Cancels the client's request with that id: `cancelled`; `ambiguous` when this process holds more than one
   * (clients of one token that keep no session id reuse ids), and none is cancelled; `none` when it holds none.
   */
  cancel(client: string, requestId: string | number, reason: unknown): 'cancelled' | 'ambiguous' | 'none' {
    const requests = this.#requests.get(InFlightCalls.#key(client, requestId));
    if (requests === undefined || requests.size === 0) return 'none';
    if (requests.size > 1) return 'ambiguous';
    for (const controller of requests) controller.abort(reason);
    return 'cancelled';
  }

  static #key(client: string, requestId: string | number): string {
    return `${client}\u0000${JSON.stringify(requestId)}`;
  }
}
