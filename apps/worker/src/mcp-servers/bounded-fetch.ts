import type { FetchLike } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { badAnswer, cutAnswer, MAX_MESSAGE_BYTES, tooLargeAnswer } from './answer-lines.js';
import { cancelledIdsOf, requestIdsOf } from './post-body.js';
import { RequestPosts } from './request-posts.js';
import { StreamResumptions } from './stream-resumptions.js';

/** What of an error body is read: it only goes into a message (a refusal's revisions, say), never whole. */
const MAX_ERROR_BODY_BYTES = 64 * 1024;

type JsonRpcId = string | number;

/**
 * A `fetch` for the SDK's StreamableHTTPClientTransport that bounds what an
 * HTTP upstream's answers may make the worker hold. The transport reads a
 * JSON answer with `response.json()` and an SSE stream event by event, each
 * without a limit: an upstream answering one call with hundreds of megabytes
 * (a file, a dump, a body that never ends) had the worker buffer all of it,
 * and a few such calls at once could take the worker — and every call on
 * it — down. Here, as for a stdio server (answer-lines.ts), one message may
 * take at most `maxBytes`:
 *
 * - a JSON answer is read up to the bound; past it the upstream's body is
 *   cancelled and the request(s) of the POST get an error answer of the
 *   worker's own instead, which fails only that call with RESOURCE_LIMIT;
 * - an SSE stream is passed on event by event, each whole (never a part of
 *   one); an event past the bound is dropped as it streams in, and on a
 *   POST's stream — which carries only that request's messages — the request
 *   gets the same error answer and that stream ends; on the session's GET
 *   stream the event is dropped and the stream goes on;
 * - an error body is read up to {@link MAX_ERROR_BODY_BYTES}.
 *
 * Redirects and other answers pass unchanged: the transport reads only their headers.
 *
 * It also ends what the transport leaves open (request-posts.ts): a request
 * whose cancel is sent — a call's timeout or cancel — has its POST aborted
 * once the cancel has gone, and its answer ends as if the upstream had ended
 * it. And what the transport leaves waiting (stream-resumptions.ts): a POST's
 * SSE answer that ended after an event with an id, without the response, is
 * resumed by the transport (a GET with its Last-Event-ID); when the upstream
 * refuses that, or the resumed stream ends without the response too, the
 * request gets the worker's own error answer instead of nothing.
 * One fetch serves one connection (request ids are the connection's).
 */
export function boundedFetch(maxBytes: number = MAX_MESSAGE_BYTES, base: FetchLike = fetch): FetchLike {
  const posts = new RequestPosts();
  const resumptions = new StreamResumptions();
  return async (url, init) => {
    const signal = init?.signal ?? undefined;
    const cancelled = cancelledIdsOf(init?.body);
    if (cancelled.length > 0) {
      resumptions.forget(cancelled);
      return posts.cancel(cancelled, async (given) => bounded(await base(url, { ...init, signal: given }), [], maxBytes), signal);
    }
    const resumedAfter = init?.method === 'GET' ? (new Headers(init.headers).get('last-event-id') ?? undefined) : undefined;
    // What a stream the worker ended would be resumed for is known: nothing. Not asked of the upstream, which may answer with an error, and the transport then ends the session.
    if (resumedAfter !== undefined && resumptions.isEnded(resumedAfter)) return new Response(null, { status: 405, statusText: 'Method Not Allowed' });
    const ids = resumedAfter === undefined ? requestIdsOf(init?.body) : resumptions.take(resumedAfter);
    const stream: EventStream = { resumptions, resumed: resumedAfter !== undefined };
    if (ids.length === 0) return bounded(await base(url, init), ids, maxBytes, stream);
    // A resumption of requests is ended by their cancel as their POST is.
    const post = posts.open(ids, signal);
    try {
      const answered = await base(url, { ...init, signal: post.signal });
      if (answered.status === 202 && resumedAfter === undefined) {
        // Streamable HTTP accepts notifications and responses with 202; a request answered so gets no answer ever
        // (the SDK would wait for it to its timeout): its call fails now, saying why.
        post.settle();
        await answered.body?.cancel().catch(() => undefined);
        const answers = ids.map((id) => badAnswer({ jsonrpc: '2.0', id, result: {} }, 'the upstream answered the request HTTP 202 Accepted, which accepts only notifications, and sent no answer'));
        return new Response(JSON.stringify(answers.length === 1 ? answers[0] : answers), { status: 200, headers: { 'content-type': 'application/json' } });
      }
      if (resumedAfter !== undefined) {
        const refused = resumptionRefused(answered);
        if (refused !== undefined) {
          post.settle();
          // A redirect is followed with the same Last-Event-ID: that GET resumes the stream.
          if (refused === 'redirect') resumptions.expect(resumedAfter, ids);
          if (typeof refused !== 'object') return bounded(answered, ids, maxBytes);
          await answered.body?.cancel().catch(() => undefined);
          const answers = ids.map((id) => endedUnanswered(id, `, and the upstream refused to resume it (${refused.reason})`));
          return madeUpStream(answers, resumptions.endedStreamId());
        }
      }
      const response = await bounded(answered, ids, maxBytes, stream);
      // A redirect's body is not read (the transport reads its headers): the POST that follows it is another.
      if (response.body === null || (!response.ok && response.status < 400)) {
        post.settle();
        return response;
      }
      return rebodied(response, post.answer(response.body));
    } catch (err) {
      post.settle();
      throw err;
    }
  };
}

/**
 * What a resumption's answer says, when it is no stream to read: a redirect (followed by the transport), the session's
 * end (404: the transport ends the session), or a refusal, why; undefined for an SSE stream.
 */
function resumptionRefused(response: Response): 'redirect' | 'ended' | { readonly reason: string } | undefined {
  if (response.status >= 300 && response.status < 400) return 'redirect';
  if (response.status === 404) return 'ended';
  if (!response.ok) return { reason: `it answered HTTP ${response.status}` };
  return mediaType(response) === 'text/event-stream' ? undefined : { reason: `it answered HTTP ${response.status} without an SSE stream` };
}

/** An SSE answer of the worker's own: `answers`, each an event with id `id` (the transport resumes a stream after its last event id). */
function madeUpStream(answers: readonly (JSONRPCMessage | undefined)[], id: string): Response {
  const events = answers.flatMap((answer) => (answer === undefined ? [] : [madeUpEvent(answer, id)]));
  return new Response(events.join(''), { status: 200, headers: { 'content-type': 'text/event-stream' } });
}

/** `message` as an SSE event of the transport's, with an id when given. */
const madeUpEvent = (message: JSONRPCMessage, id?: string): string => `${id === undefined ? '' : `id: ${id}\n`}event: message\ndata: ${JSON.stringify(message)}\n\n`;

/** The media type of a response, as the transport reads it. */
const mediaType = (response: Response): string | undefined => (response.headers.get('content-type') ?? '').split(';')[0]?.trim().toLowerCase();

/** What an SSE stream the fetch bounds is, for what is to become of requests it ends without answering. */
export interface EventStream {
  /** Where a stream that the transport will resume notes its requests, for the resumption to answer. */
  readonly resumptions: StreamResumptions;
  /** The stream resumes another (a GET with a Last-Event-ID). */
  readonly resumed: boolean;
}

/** `response` with its body bounded as {@link boundedFetch} says, for a POST of requests `ids` (none: a notification's, the session's GET stream) or a resumption of their stream. */
async function bounded(response: Response, ids: readonly JsonRpcId[], maxBytes: number, stream?: EventStream): Promise<Response> {
  if (response.body === null) return response;
  if (response.status >= 400) return rebodied(response, response.body.pipeThrough(firstBytes(MAX_ERROR_BODY_BYTES)));
  if (!response.ok) return response;
  const type = mediaType(response);
  if (type === 'application/json') return boundedJson(response, response.body, ids, maxBytes);
  if (type === 'text/event-stream') {
    if (ids.length === 0) return rebodied(response, response.body.pipeThrough(boundedEvents(ids, maxBytes, stream)));
    // A POST's answer whose connection breaks off ends here as a stream that ended: its requests get the worker's
    // answer saying so, rather than none (the SDK reports the break and leaves them waiting for their timeout).
    const broke: BrokenStream = {};
    return rebodied(response, endingOnError(response.body, broke).pipeThrough(boundedEvents(ids, maxBytes, stream, broke)));
  }
  return response;
}

/** Why a stream broke off, once it has (see {@link endingOnError}). */
interface BrokenStream {
  why?: string;
}

/**
 * `source`, ending as a stream that ended when reading it fails (its connection broke off), `broke.why` saying how;
 * an abort passes as it is. A cancel of the result cancels the source.
 */
function endingOnError(source: ReadableStream<Uint8Array>, broke: BrokenStream): ReadableStream<Uint8Array> {
  const reader = source.getReader();
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const { value, done } = await reader.read();
        if (done) controller.close();
        else controller.enqueue(value);
      } catch (error) {
        // The worker's own abort (a cancelled request's POST, see request-posts.ts) is no break: it ends as it did.
        if (error instanceof Error && error.name === 'AbortError') return controller.error(error);
        broke.why = brokeOffText(error);
        controller.close();
      }
    },
    cancel: (reason) => reader.cancel(reason),
  });
}

/** How a body's read failed, in the fleet's words and the network error's code: `the connection broke off (UND_ERR_SOCKET)`. */
function brokeOffText(error: unknown): string {
  const cause: unknown = error instanceof Error ? error.cause : undefined;
  const code = cause instanceof Error ? (cause as NodeJS.ErrnoException).code : undefined;
  return `the connection broke off during the answer${typeof code === 'string' ? ` (${code})` : ''}`;
}

/** `response` with another body, keeping its status, headers and URL (the transport reads the URL of a redirect). */
function rebodied(response: Response, body: ConstructorParameters<typeof Response>[0]): Response {
  const copy = new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
  Object.defineProperty(copy, 'url', { value: response.url });
  return copy;
}

/**
 * The most bytes of a message that are looked at for an answer that is neither a result nor an error
 * (answer-lines.ts's badAnswer): such an answer is a few dozen bytes, and a larger one only fails later.
 */
const SCREENED_BYTES = 64 * 1024;

/**
 * `text`, one JSON-RPC message or a batch, with each answer that is neither a result nor an error replaced by
 * the worker's own error answer to its request; undefined when there is none. The SDK's transport refuses such
 * a message as a whole: an SSE event was dropped, the call left to wait for its timeout (and a JSON body read
 * here, as one whose length was declared is, failed its call with the schema's raw text).
 */
function screened(text: string): string | undefined {
  // Requests and notifications carry a method; the answers worth a look are small, and the usual ones say a result or an error object.
  if (text.length > SCREENED_BYTES || text.includes('"method"')) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return undefined;
  }
  const messages = Array.isArray(parsed) ? (parsed as unknown[]) : [parsed];
  const made = messages.map((m) => badAnswer(m));
  if (made.every((m) => m === undefined)) return undefined;
  const fixed = messages.map((m, i) => made[i] ?? m);
  return JSON.stringify(Array.isArray(parsed) ? fixed : fixed[0]);
}

async function boundedJson(response: Response, body: ReadableStream<Uint8Array>, ids: readonly JsonRpcId[], maxBytes: number): Promise<Response> {
  // The usual answer says its length, and fetch delivers no more than it says: within the bound it passes as it is,
  // not read and copied here first (the SDK's transport fails its call at once if it is not a JSON-RPC message, see
  // notJsonRpc in upstream-instance.ts). A compressed one is decoded by fetch, to any size, so it is counted.
  const declared = response.headers.get('content-length');
  if (declared !== null && response.headers.get('content-encoding') === null && Number(declared) <= maxBytes) return response;
  const parts: Uint8Array[] = [];
  let size = 0;
  const reader = body.getReader();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > maxBytes) {
      // Counted to here only: the rest is never read.
      await reader.cancel().catch(() => undefined);
      const answers = ids.map((id) => tooLargeAnswer(id, size, maxBytes, true));
      return rebodied(response, JSON.stringify(answers.length === 1 ? answers[0] : answers));
    }
    parts.push(value);
  }
  const whole = Buffer.concat(parts, size);
  return rebodied(response, (size <= SCREENED_BYTES ? screened(whole.toString('utf8')) : undefined) ?? whole);
}

/** Passes the first `maxBytes` of a stream and ends it there, cancelling the rest. */
function firstBytes(maxBytes: number): TransformStream<Uint8Array, Uint8Array> {
  let left = maxBytes;
  return new TransformStream({
    transform(chunk, controller) {
      if (left <= 0) return;
      controller.enqueue(chunk.byteLength <= left ? chunk : chunk.subarray(0, left));
      left -= chunk.byteLength;
      if (left <= 0) controller.terminate();
    },
  });
}

const LF = 0x0a;
const CR = 0x0d;

/**
 * Splits an SSE stream into whole events (an event ends at a blank line:
 * two line ends in a row, each LF, CRLF or CR) and passes each on whole;
 * an event longer than `maxBytes` is dropped as it arrives. With `ids` (a
 * POST's stream) each of them is answered with an error at once and the
 * stream ends; without (the session's GET stream), the stream goes on.
 *
 * A POST's stream that ends without the response to one of its `ids` gets,
 * at its end, the worker's own error answer to it ({@link endedUnanswered}):
 * the SDK's transport waits on, and the call ended at its timeout (an
 * empty stream, an event that is not JSON, a response to another request,
 * only progress), where the same mistake as a JSON body fails at once. Not
 * when an event carried an id: the transport resumes such a stream (a GET
 * with its Last-Event-ID) for the response, and `stream` notes which
 * requests that resumption is to answer. A resumed stream that ends so, with
 * no id of its own, ends with the worker's answers, whose event id `stream`
 * knows for the worker's (the transport would resume it again).
 */
export function boundedEvents(ids: readonly JsonRpcId[], maxBytes: number, stream?: EventStream, broke?: BrokenStream): TransformStream<Uint8Array, Uint8Array> {
  /** The current event's chunks so far, and their bytes; while dropping, only counted. */
  let parts: Uint8Array[] = [];
  let size = 0;
  let dropping = false;
  let terminated = false;
  /** The requests not answered on the stream yet; the events with data passed on; the last id one of them had. */
  const waiting = new Set(ids);
  let events = 0;
  let lastId: string | undefined;
  /** The last byte seen was a line end (so another makes a blank line), and whether it was a CR (so an LF after it is the same line end). */
  let atLineEnd = false;
  let afterCr = false;
  const encoder = new TextEncoder();

  return new TransformStream({
    transform(chunk, controller) {
      if (terminated) return;
      let start = 0;
      // Where the next LF and CR of the chunk are, found once each time they are passed: one scan of the chunk in all.
      let lf = -2;
      let cr = -2;
      for (let i = 0; i < chunk.length; i += 1) {
        const byte = chunk[i];
        if (byte !== LF && byte !== CR) {
          atLineEnd = false;
          afterCr = false;
          // Skip to the next line end: the bytes between cannot end an event.
          if (lf !== -1 && lf < i) lf = chunk.indexOf(LF, i);
          if (cr !== -1 && cr < i) cr = chunk.indexOf(CR, i);
          const next = lf === -1 ? cr : cr === -1 ? lf : Math.min(lf, cr);
          if (next === -1) break;
          i = next - 1;
          continue;
        }
        if (byte === LF && afterCr) {
          // The LF of a CRLF: the line end the CR began.
          afterCr = false;
          continue;
        }
        afterCr = byte === CR;
        if (!atLineEnd) {
          atLineEnd = true;
          continue;
        }
        // A blank line: the event ends after this byte (and the LF of a CRLF, which the next event's start skips).
        atLineEnd = false;
        take(chunk.subarray(start, i + 1), controller);
        if (terminated) return;
        end(controller);
        start = i + 1;
      }
      if (start < chunk.length) take(chunk.subarray(start), controller);
    },
    flush(controller) {
      if (waiting.size > 0 && lastId !== undefined) stream?.resumptions.expect(lastId, [...waiting]);
      if (waiting.size === 0 || lastId !== undefined) {
        // An unfinished event at the end goes on as it came: what becomes of it is the SSE parser's business, as without the bound.
        end(controller);
        return;
      }
      // The SSE parser drops an unfinished event at the end of a stream: dropped here, so that the answers made up are events of their own.
      const held = events === 0 ? 'no event' : `${events} event${events === 1 ? '' : 's'}, none of them the response`;
      const resumed = stream?.resumed === true;
      const id = resumed ? stream.resumptions.endedStreamId() : undefined;
      for (const request of waiting) {
        const answer =
          broke?.why !== undefined
            ? cutAnswer(request, broke.why)
            : endedUnanswered(request, resumed ? `, and its resumption ended without it too (it held ${held})` : ` (it held ${held})`);
        if (answer !== undefined) controller.enqueue(encoder.encode(madeUpEvent(answer, id)));
      }
    },
  });

  function take(part: Uint8Array, controller: TransformStreamDefaultController<Uint8Array>): void {
    size += part.byteLength;
    if (dropping) return;
    if (size <= maxBytes) {
      parts.push(part);
      return;
    }
    dropping = true;
    parts = [];
    if (ids.length === 0) return;
    // A POST's stream carries only its request's messages: once that request is answered, nothing on it is wanted,
    // so the stream ends here and the upstream's body is cancelled rather than read (and dropped) to its end.
    for (const id of ids) controller.enqueue(encoder.encode(madeUpEvent(tooLargeAnswer(id, size, maxBytes, true))));
    controller.terminate();
    terminated = true;
  }

  function end(controller: TransformStreamDefaultController<Uint8Array>): void {
    if (!dropping && parts.length > 0) {
      const event = parts.length === 1 ? (parts[0] as Uint8Array) : Buffer.concat(parts, size);
      const bytes = Buffer.from(event.buffer, event.byteOffset, event.byteLength);
      const facts = size <= SCREENED_BYTES ? smallEventFacts(bytes.toString('utf8'), waiting) : largeEventFacts(bytes, waiting);
      if (facts.data) events += 1;
      if (facts.id !== undefined) lastId = facts.id;
      if (facts.answers !== undefined) waiting.delete(facts.answers);
      controller.enqueue(facts.fixed === undefined ? event : encoder.encode(facts.fixed));
    }
    parts = [];
    size = 0;
    dropping = false;
  }
}

/** What the SSE parser and the SDK's transport make of one whole event. */
interface EventFacts {
  /** It has data: the parser passes it on. */
  readonly data: boolean;
  /** Its id, when it has one and data: the transport may resume the stream after it. */
  readonly id?: string | undefined;
  /** The request of those waiting that it is the response to. */
  readonly answers?: JsonRpcId | undefined;
  /** The event of the worker's own answer to pass on instead, for an answer that is neither a result nor an error (see {@link screened}). */
  readonly fixed?: string | undefined;
}

/** The value of an SSE field line after its `name:` and the one space that may follow. */
const fieldValue = (line: string, name: string): string => line.slice(line.startsWith(`${name}: `) ? name.length + 2 : name.length + 1);

function smallEventFacts(event: string, waiting: ReadonlySet<JsonRpcId>): EventFacts {
  const data: string[] = [];
  let type: string | undefined;
  let id = '';
  for (const line of event.split(/\r\n|\r|\n/)) {
    if (line.startsWith('data:')) data.push(fieldValue(line, 'data'));
    else if (line.startsWith('event:')) type = fieldValue(line, 'event');
    else if (line.startsWith('id:')) id = fieldValue(line, 'id');
  }
  const facts = { data: data.length > 0, id: data.length > 0 && id !== '' ? id : undefined };
  // The transport reads only events of type `message`.
  if (data.length === 0 || (type !== undefined && type.trim() !== 'message')) return facts;
  const text = data.join('\n');
  const fixed = screened(text);
  return { ...facts, answers: answeredId(text, waiting), ...(fixed === undefined ? {} : { fixed: `event: message\ndata: ${fixed}\n\n` }) };
}

/** The request of those waiting that the data of an event answers (a response, not a request of the upstream's own); else undefined. */
function answeredId(data: string, waiting: ReadonlySet<JsonRpcId>): JsonRpcId | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(data);
  } catch {
    return undefined;
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed) || 'method' in parsed) return undefined;
  const id = (parsed as { id?: unknown }).id;
  return (typeof id === 'string' || typeof id === 'number') && waiting.has(id) ? id : undefined;
}

/** What of a large event's edges is read: its fields and a response's id sit at its start or end. */
const EDGE_BYTES = 512;

/**
 * {@link smallEventFacts} for an event too large to parse twice (the transport parses it), read from its edges:
 * a response's `id` comes first or last. One taken for an answer that was not would leave its call waiting; one
 * missed gets a second answer, which the SDK's client drops as one for a request it no longer waits for.
 */
function largeEventFacts(event: Buffer, waiting: ReadonlySet<JsonRpcId>): EventFacts {
  const edges = `${event.subarray(0, EDGE_BYTES).toString('utf8')}\n${event.subarray(-EDGE_BYTES).toString('utf8')}`;
  const type = /^event:(.*)$/m.exec(edges)?.[1]?.trim();
  const data = /^data:/m.test(edges);
  // The SSE parser takes an id line's value up to its line end, after one space.
  const id = data ? /^id: ?([^\r\n]+)/m.exec(edges)?.[1] : undefined;
  const facts = { data, id };
  if ((type !== undefined && type !== 'message') || /"method"\s*:/.test(edges)) return facts;
  for (const id of waiting) {
    const quoted = JSON.stringify(id).replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    if (new RegExp(`"id"\\s*:\\s*${quoted}\\s*[,}]`).test(edges)) return { ...facts, answers: id };
  }
  return facts;
}

/**
 * The answer the worker makes up for request `id` whose SSE answer ended without its response, `more` saying what
 * else is known: its call fails at once, as one answered with neither a result nor an error does.
 */
function endedUnanswered(id: JsonRpcId, more: string): JSONRPCMessage | undefined {
  // badAnswer gives the reason it is told for an answer that is well formed: a stand-in here, never sent.
  return badAnswer({ jsonrpc: '2.0', id, result: {} }, `the SSE stream of its answer ended without a response to the request${more}`);
}
