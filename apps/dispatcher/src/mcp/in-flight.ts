import { createHash } from 'node:crypto';

/**
 * The `tools/call` requests this process is serving, so that a
 * `notifications/cancelled` can find them. In stateless Streamable HTTP every
 * POST gets its own server and transport: the cancellation arrives on another
 * request than the call it names, so the SDK's per-server bookkeeping never
 * sees both. Requests are keyed by who sent them (a hash of the bearer token,
 * or the dev-mode task header) and their JSON-RPC id, which a client keeps
 * unique among its own requests.
 */
export class InFlightCalls {
  readonly #requests = new Map<string, Set<AbortController>>();

  /** The key of a client's requests: the token it authenticates with (hashed, never kept). */
  static clientOf(headers: { authorization?: string | undefined; 'x-forge-task'?: string | string[] | undefined }): string {
    const task = headers['x-forge-task'];
    const who = headers.authorization ?? `anonymous:${Array.isArray(task) ? task.join(',') : (task ?? '')}`;
    return createHash('sha256').update(who).digest('base64url');
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
   * Cancels the client's request with that id (every one, should the same token run two clients that reuse ids).
   * @returns whether this process held such a request.
   */
  cancel(client: string, requestId: string | number, reason: unknown): boolean {
    const requests = this.#requests.get(InFlightCalls.#key(client, requestId));
    for (const controller of requests ?? []) controller.abort(reason);
    return requests !== undefined && requests.size > 0;
  }

  static #key(client: string, requestId: string | number): string {
    return `${client}\u0000${JSON.stringify(requestId)}`;
  }
}
