type JsonRpcId = string | number;

/**
 * How long the POST of a `notifications/cancelled` may wait for the upstream's answer: past it, the cancel and the
 * POST of the request it cancels are given up. An upstream hung as a whole answers no cancel either.
 */
export const CANCEL_GRACE_MS = 5_000;

/** One request POST's own signal, and what ends its life. */
export interface RequestPost {
  /** Aborted when a cancel of one of its requests has been sent, or when the signal it was opened with aborts. */
  readonly signal: AbortSignal;
  /**
   * `body` as the POST's answer to hand on: it ends as if the upstream had ended it when the POST is aborted
   * (rather than erroring, which the SDK's transport reads as a lost connection), and the POST is forgotten
   * once it ends or its reader cancels it.
   */
  answer(body: ReadableStream<Uint8Array>): ReadableStream<Uint8Array>;
  /** Forgets the POST: its answer is whole, or it failed. */
  settle(): void;
}

/**
 * The request POSTs of one connection to an HTTP upstream still open, by
 * request id, so that a call that ended hangs up on its own POST.
 *
 * The SDK's 2025-era transport sends every POST with its one signal, aborted
 * only when it closes. On a call's timeout or cancel it sends
 * `notifications/cancelled` and forgets the request, but the request's POST
 * stays open until the upstream answers: against an upstream that does not,
 * one socket per call that ended, without bound. The fetch it is given
 * (bounded-fetch.ts) sees every POST's JSON-RPC body, so here each request's
 * POST gets a signal of its own, aborted once the cancel of that request has
 * been sent (its POST answered, or after {@link CANCEL_GRACE_MS}), as the
 * 2026-07-28 transport (modern-http-transport.ts) aborts a cancelled
 * request's POST. The cancel goes first: an upstream of the 2025 era is told
 * it, not left to guess from a connection that closed.
 *
 * Request ids are the connection's (the SDK's client counts them), so one of
 * these serves one connection.
 */
export class RequestPosts {
  readonly #open = new Map<JsonRpcId, AbortController>();

  /** The POST of requests `ids`, opened with `signal` (the transport's own, aborted when it closes). */
  open(ids: readonly JsonRpcId[], signal?: AbortSignal): RequestPost {
    const { controller, unlink } = following(signal);
    for (const id of ids) this.#open.set(id, controller);
    const settle = (): void => {
      unlink();
      for (const id of ids) if (this.#open.get(id) === controller) this.#open.delete(id);
    };
    return { signal: controller.signal, answer: (body) => endingQuietly(body, controller.signal, settle), settle };
  }

  /**
   * Sends the cancel of requests `ids` through `send`, with a signal that gives it up after the grace; then, answered
   * or not, aborts those requests' POSTs.
   */
  async cancel<T>(ids: readonly JsonRpcId[], send: (signal: AbortSignal) => Promise<T>, signal?: AbortSignal): Promise<T> {
    const { controller, unlink } = following(signal);
    const timer = setTimeout(() => controller.abort(new DOMException(`the upstream did not take the cancel within ${CANCEL_GRACE_MS} ms`, 'TimeoutError')), CANCEL_GRACE_MS);
    try {
      return await send(controller.signal);
    } finally {
      clearTimeout(timer);
      unlink();
      for (const id of ids) {
        this.#open.get(id)?.abort();
        this.#open.delete(id);
      }
    }
  }
}

/**
 * A controller of its own that aborts when `signal` does, until unlinked. Not AbortSignal.any: a signal it makes
 * from the transport's, which lives as long as the connection, stays referenced by it (nodejs/node#55351, #64476).
 */
function following(signal: AbortSignal | undefined): { controller: AbortController; unlink: () => void } {
  const controller = new AbortController();
  if (signal === undefined) return { controller, unlink: () => undefined };
  const abort = (): void => controller.abort(signal.reason);
  if (signal.aborted) abort();
  else signal.addEventListener('abort', abort, { once: true });
  return { controller, unlink: () => signal.removeEventListener('abort', abort) };
}

/**
 * `source` read on demand; once `signal` aborts, its error (fetch errors a body whose request was aborted) ends
 * the stream instead, and `settle` runs once when the stream ends, fails or its reader cancels it.
 */
function endingQuietly(source: ReadableStream<Uint8Array>, signal: AbortSignal, settle: () => void): ReadableStream<Uint8Array> {
  const reader = source.getReader();
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        try {
          const { value, done } = await reader.read();
          if (!done) {
            controller.enqueue(value);
            return;
          }
          settle();
          controller.close();
        } catch (err) {
          settle();
          if (signal.aborted) controller.close();
          else controller.error(err);
        }
      },
      async cancel(reason) {
        settle();
        await reader.cancel(reason);
      },
    },
    // Nothing read ahead: the reader's pace is the upstream's, as without this.
    { highWaterMark: 0 },
  );
}
