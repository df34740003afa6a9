import { randomUUID } from 'node:crypto';

type JsonRpcId = string | number;

/**
 * The requests of one connection to an HTTP upstream whose SSE answer ended
 * without their response after an event with an id, by that id: the SDK's
 * transport resumes such a stream with a GET carrying it as Last-Event-ID,
 * and the worker's fetch (bounded-fetch.ts) must know which requests that
 * GET's answer is to settle. When the upstream refuses the resumption (405
 * for an upstream that offers no GET stream, any other error, an answer that
 * is not a stream) or the resumed stream ends without the response too, the
 * transport gives nothing to the request and its call waited for its
 * timeout; the fetch answers them with the worker's own error instead.
 *
 * The transport resumes the stream it is given that way again after it ends,
 * from its last event id: a stream that the worker ended with its own answers
 * carries an id made here ({@link endedStreamId}), and the GET that would
 * resume it is answered 405 by the fetch, not sent ({@link isEnded}).
 */
export class StreamResumptions {
  readonly #waiting = new Map<string, readonly JsonRpcId[]>();
  readonly #ended = new Set<string>();

  /** Notes that a stream ended after event `lastEventId` without the responses to `ids`. */
  expect(lastEventId: string, ids: readonly JsonRpcId[]): void {
    this.#waiting.set(lastEventId, ids);
  }

  /** The requests that the resumption after `lastEventId` is to answer (none for a stream of no request's), forgotten here. */
  take(lastEventId: string): readonly JsonRpcId[] {
    const ids = this.#waiting.get(lastEventId) ?? [];
    this.#waiting.delete(lastEventId);
    return ids;
  }

  /** Forgets requests `ids` (their calls ended: a timeout, a cancel): a later resumption does not answer them. */
  forget(ids: readonly JsonRpcId[]): void {
    for (const [lastEventId, waiting] of this.#waiting) {
      const left = waiting.filter((id) => !ids.includes(id));
      if (left.length === 0) this.#waiting.delete(lastEventId);
      else if (left.length < waiting.length) this.#waiting.set(lastEventId, left);
    }
  }

  /** A new event id for the last event of a stream that the worker ended: the GET resuming after it is not sent. */
  endedStreamId(): string {
    const id = `forge-ended-${randomUUID()}`;
    this.#ended.add(id);
    return id;
  }

  /** Whether `lastEventId` is one of {@link endedStreamId}'s, forgotten here (the transport resumes after it once). */
  isEnded(lastEventId: string): boolean {
    return this.#ended.delete(lastEventId);
  }
}
