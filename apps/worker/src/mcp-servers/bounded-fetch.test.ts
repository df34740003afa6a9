import { getEventListeners } from 'node:events';
import type { FetchLike } from '@modelcontextprotocol/sdk/shared/transport.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { notAnAnswer, tooLargeBytes } from './answer-lines.js';
import { boundedEvents, boundedFetch } from './bounded-fetch.js';
import { CANCEL_GRACE_MS } from './request-posts.js';

const text = (bytes: Uint8Array[]): string => Buffer.concat(bytes).toString('utf8');

/** Runs `chunks` through a bounded-events stream; returns what came out and whether the source was cancelled. */
async function throughEvents(chunks: string[], ids: (string | number)[], maxBytes: number): Promise<{ out: string; cancelled: () => boolean }> {
  let cancelled = false;
  let i = 0;
  const source = new ReadableStream<Uint8Array>({
    pull(controller) {
      const next = chunks[i];
      i += 1;
      if (next === undefined) controller.close();
      else controller.enqueue(Buffer.from(next));
    },
    cancel() {
      cancelled = true;
    },
  });
  const out: Uint8Array[] = [];
  const reader = source.pipeThrough(boundedEvents(ids, maxBytes)).getReader();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    out.push(value);
  }
  return { out: text(out), cancelled: () => cancelled };
}

/** A fetch that answers every request with `body` (split into `chunks`) and `type`. */
function answering(chunks: string[], type: string, status = 200, headers: Record<string, string> = {}): typeof fetch {
  return (() => {
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        for (const c of chunks) controller.enqueue(Buffer.from(c));
        controller.close();
      },
    });
    return Promise.resolve(new Response(body, { status, headers: { 'content-type': type, 'mcp-session-id': 's-1', ...headers } }));
  });
}

const request = (id: number) => JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'x' } });

describe('boundedEvents', () => {
  it('passes events through whole, however the chunks split them, with LF, CRLF or CR line ends', async () => {
    const events = 'data: one\n\nid: 2\r\ndata: two\r\n\r\ndata: three\r\rdata: four\n\n';
    for (const size of [1, 2, 3, 7, events.length]) {
      const chunks = events.match(new RegExp(`[\\s\\S]{1,${size}}`, 'g')) ?? [];
      expect((await throughEvents(chunks, [], 1024)).out).toBe(events);
    }
  });

  it('drops an oversized event of the session stream and goes on', async () => {
    const big = `data: ${'x'.repeat(100)}\n\n`;
    const { out, cancelled } = await throughEvents(['data: a\n\n', big.slice(0, 40), big.slice(40), 'data: b\n\n'], [], 64);
    expect(out).toBe('data: a\n\ndata: b\n\n');
    expect(cancelled()).toBe(false);
  });

  it('answers the requests of a POST stream at once when an event passes the bound, ends the stream and cancels the upstream', async () => {
    const { out, cancelled } = await throughEvents(['data: {"jsonrpc":"2.0","method":"notifications/progress"}\n\n', 'data: ', 'y'.repeat(50), 'y'.repeat(50), 'never read'], [7], 64);
    const events = out.split('\n\n').filter((e) => e !== '');
    expect(events[0]).toBe('data: {"jsonrpc":"2.0","method":"notifications/progress"}');
    expect(events).toHaveLength(2);
    const answer = JSON.parse((events[1] ?? '').replace('event: message\ndata: ', '')) as { id: number; error: { code: number; message: string; data: unknown } };
    expect(answer.id).toBe(7);
    expect(tooLargeBytes(new McpError(answer.error.code, answer.error.message, answer.error.data))).toEqual({ bytes: 106, atLeast: true, bound: 64 });
    // The pipe cancels its source once it sees the end, a few ticks after the reader did.
    await expect.poll(cancelled).toBe(true);
  });

  it('passes an unfinished last event on, as it came', async () => {
    expect((await throughEvents(['data: a\n\ndata: b\n'], [], 64)).out).toBe('data: a\n\ndata: b\n');
  });

  it("answers each request of a POST stream that ends without its response with the worker's own error, at the end, and only those", async () => {
    const progress = 'data: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}\n\n';
    for (const events of [[], ['data: not json at all\n\n'], ['data: {"jsonrpc":"2.0","id":999,"result":{}}\n\n'], [progress], ['event: other\ndata: {"jsonrpc":"2.0","id":7,"result":{}}\n\n']]) {
      const { out } = await throughEvents(events, [7], 1024);
      expect(out.startsWith(events.join(''))).toBe(true);
      const made = out.slice(events.join('').length);
      expect(made).toMatch(/^event: message\ndata: .*\n\n$/);
      const answer = JSON.parse(made.slice('event: message\ndata: '.length)) as { id: number; error: { code: number; message: string; data: unknown } };
      expect(answer.id).toBe(7);
      expect(notAnAnswer(new McpError(answer.error.code, answer.error.message, answer.error.data))).toContain('ended without a response');
    }
    // None for a request answered on its stream (a bad answer too), for a stream the SDK resumes (an event with an id), or on the session stream.
    const answered = ['data: {"jsonrpc":"2.0","method":"notifications/progress"}\n\n', 'data: {"jsonrpc":"2.0","id":7,"result":{"content":[]}}\n\n'];
    expect((await throughEvents(answered, [7], 1024)).out).toBe(answered.join(''));
    // Large answers are not parsed here: their id is found at their edges.
    const large = `data: {"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"${'l'.repeat(70_000)}"}]}}\n\n`;
    expect((await throughEvents([large], [7], 1024 * 1024)).out).toBe(large);
    const largeLast = `data: {"result":{"content":[{"type":"text","text":"${'l'.repeat(70_000)}"}]},"jsonrpc":"2.0","id":"x-7"}\n\n`;
    expect((await throughEvents([largeLast], ['x-7'], 1024 * 1024)).out).toBe(largeLast);
    const nulled = (await throughEvents(['data: {"jsonrpc":"2.0","id":7,"result":null}\n\n'], [7], 1024)).out;
    expect(nulled.match(/"id":7/g)).toHaveLength(1);
    const primed = ['id: ev-1\ndata: \n\n'];
    expect((await throughEvents(primed, [7], 1024)).out).toBe(primed.join(''));
    expect((await throughEvents(['data: a\n\n'], [], 1024)).out).toBe('data: a\n\n');
  });

  it('drops an unfinished last event of a POST stream before the answer it makes up (the SSE parser drops it at the end anyway)', async () => {
    const { out } = await throughEvents(['data: a\n\n', 'data: {"jsonrpc":"2.0","id":7,"res'], [7], 1024);
    expect(out).toMatch(/^data: a\n\nevent: message\ndata: \{"jsonrpc":"2.0","id":7,"error"/);
  });
});

describe('boundedFetch', () => {
  it('passes a JSON answer within the bound unchanged, with its status and headers', async () => {
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, result: { content: [] } });
    const response = await boundedFetch(1024, answering([body.slice(0, 10), body.slice(10)], 'application/json; charset=utf-8'))('http://upstream/mcp', { method: 'POST', body: request(1) });
    expect(response.status).toBe(200);
    expect(response.headers.get('mcp-session-id')).toBe('s-1');
    expect(await response.json()).toEqual(JSON.parse(body));
  });

  it('answers the POST\'s request with the worker\'s own error when the JSON answer passes the bound', async () => {
    const response = await boundedFetch(64, answering(['{"jsonrpc":"2.0","id":3,"result":{"text":"', 'z'.repeat(100), '"}}'], 'application/json'))('http://upstream/mcp', { method: 'POST', body: request(3) });
    const answer = (await response.json()) as { id: number; error: { code: number; message: string; data: unknown } };
    expect(answer.id).toBe(3);
    expect(tooLargeBytes(new McpError(answer.error.code, answer.error.message, answer.error.data))).toMatchObject({ atLeast: true });
  });

  it('passes a JSON answer that declares a length within the bound as it is, and counts one that is compressed', async () => {
    const body = JSON.stringify({ jsonrpc: '2.0', id: 5, result: { content: [] } });
    const declared = String(Buffer.byteLength(body));
    let pulled = 0;
    const source = new ReadableStream<Uint8Array>(
      {
        pull(controller) {
          pulled += 1;
          controller.enqueue(Buffer.from(body));
          controller.close();
        },
      },
      { highWaterMark: 0 },
    );
    const original = new Response(source, { headers: { 'content-type': 'application/json', 'content-length': declared } });
    const passed = await boundedFetch(1024, () => Promise.resolve(original))('http://upstream/mcp', { method: 'POST', body: request(5) });
    // Not read here: its bytes go to the reader as they come.
    expect(pulled).toBe(0);
    expect(passed.headers.get('content-length')).toBe(declared);
    expect(await passed.json()).toEqual(JSON.parse(body));
    // Decoded by fetch, a compressed body may be any size whatever its declared length: it is read and counted.
    const big = JSON.stringify({ jsonrpc: '2.0', id: 6, result: { text: 'w'.repeat(200) } });
    const compressed = await boundedFetch(64, answering([big], 'application/json', 200, { 'content-length': '40', 'content-encoding': 'gzip' }))('http://upstream/mcp', { method: 'POST', body: request(6) });
    const answer = (await compressed.json()) as { id: number; error: { code: number; message: string; data: unknown } };
    expect(answer.id).toBe(6);
    expect(tooLargeBytes(new McpError(answer.error.code, answer.error.message, answer.error.data))).toMatchObject({ atLeast: true, bound: 64 });
  });

  it('reads no more than the start of an error body', async () => {
    const response = await boundedFetch(64, answering(['e'.repeat(40_000), 'e'.repeat(40_000)], 'text/plain', 500))('http://upstream/mcp', { method: 'POST', body: request(4) });
    expect(response.status).toBe(500);
    expect((await response.text()).length).toBe(64 * 1024);
  });
});

/** A fetch whose answers never end (or never come, with `headers: false`) until the request's signal aborts; records the requests, and each abort in order. */
function hanging(options: { sse: boolean; headers?: boolean }): { upstream: FetchLike; log: string[] } {
  const log: string[] = [];
  const upstream: FetchLike = (_url, init) => {
    const body = JSON.parse(bodyOf(init)) as { id?: number; method: string; params?: { requestId?: number } };
    log.push(body.id === undefined ? `${body.method} ${body.params?.requestId}` : `request ${body.id}`);
    if (body.id === undefined) return Promise.resolve(new Response(null, { status: 202 }));
    const aborted = (): DOMException => {
      log.push(`aborted ${body.id}`);
      return new DOMException('This operation was aborted', 'AbortError');
    };
    if (options.headers === false) return new Promise<Response>((_resolve, reject) => init?.signal?.addEventListener('abort', () => reject(aborted())));
    // As fetch does: an abort errors the body being read.
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        if (options.sse) controller.enqueue(Buffer.from('data: {"jsonrpc":"2.0","method":"notifications/progress"}\n\n'));
        init?.signal?.addEventListener('abort', () => controller.error(aborted()));
      },
    });
    return Promise.resolve(new Response(stream, { headers: { 'content-type': options.sse ? 'text/event-stream' : 'application/json' } }));
  };
  return { upstream, log };
}

const bodyOf = (init?: RequestInit): string => (typeof init?.body === 'string' ? init.body : '');

const cancel = (id: number) => JSON.stringify({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: id, reason: 'timed out' } });

/** All of a body, as text; rejects with what reading it throws. */
const readAll = async (body: ReadableStream<Uint8Array> | null): Promise<string> => (body === null ? '' : new Response(body).text());

describe('boundedFetch and a cancel', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it("aborts the cancelled request's POST once the cancel's POST is answered; its SSE answer then ends, quietly", async () => {
    const { upstream, log } = hanging({ sse: true });
    const bounded = boundedFetch(1024, upstream);
    const response = await bounded('http://upstream/mcp', { method: 'POST', body: request(1) });
    const read = readAll(response.body);
    await bounded('http://upstream/mcp', { method: 'POST', body: request(2) });
    await bounded('http://upstream/mcp', { method: 'POST', body: cancel(1) });
    // The SDK's transport reads an error of the stream as a lost connection: an abort ends it as if the upstream had.
    expect(await read).toBe('data: {"jsonrpc":"2.0","method":"notifications/progress"}\n\n');
    expect(log).toEqual(['request 1', 'request 2', 'notifications/cancelled 1', 'aborted 1']);
  });

  it('aborts a POST still waiting for its headers, and a JSON answer being read', async () => {
    for (const options of [{ sse: false, headers: false }, { sse: false }]) {
      const { upstream, log } = hanging(options);
      const bounded = boundedFetch(1024, upstream);
      // What the transport does with the failure: the call has ended already.
      const answer = bounded('http://upstream/mcp', { method: 'POST', body: request(3) }).then(
        (r) => r.text(),
        (err: unknown) => err,
      );
      await vi.waitFor(() => expect(log).toEqual(['request 3']));
      await bounded('http://upstream/mcp', { method: 'POST', body: cancel(3) });
      expect(await answer).toMatchObject({ name: 'AbortError' });
      expect(log).toEqual(['request 3', 'notifications/cancelled 3', 'aborted 3']);
    }
  });

  it('gives a cancel that the upstream does not take up CANCEL_GRACE_MS, then aborts it and the request', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const { upstream, log } = hanging({ sse: true });
    const unanswering = hanging({ sse: false, headers: false }).upstream;
    const neverAnswered: FetchLike = (url, init) => (bodyOf(init).includes('cancelled') ? unanswering(url, { ...init, body: request(0) }) : upstream(url, init));
    const bounded = boundedFetch(1024, neverAnswered);
    const response = await bounded('http://upstream/mcp', { method: 'POST', body: request(4) });
    const read = readAll(response.body);
    const cancelled = bounded('http://upstream/mcp', { method: 'POST', body: cancel(4) }).then(
      () => undefined,
      (err: unknown) => err,
    );
    await vi.advanceTimersByTimeAsync(CANCEL_GRACE_MS - 1);
    expect(log).toEqual(['request 4']);
    await vi.advanceTimersByTimeAsync(1);
    expect(await cancelled).toMatchObject({ name: 'AbortError' });
    expect(await read).toContain('notifications/progress');
    expect(log).toEqual(['request 4', 'aborted 4']);
  });

  it("follows the transport's own signal (aborted when it closes) while a POST is open, and no longer once its answer has ended", async () => {
    const { upstream, log } = hanging({ sse: true });
    const bounded = boundedFetch(1024, upstream);
    const transport = new AbortController();
    const response = await bounded('http://upstream/mcp', { method: 'POST', body: request(6), signal: transport.signal });
    expect(getEventListeners(transport.signal, 'abort')).toHaveLength(1);
    transport.abort();
    expect(await readAll(response.body)).toContain('notifications/progress');
    expect(log).toEqual(['request 6', 'aborted 6']);
    expect(getEventListeners(transport.signal, 'abort')).toHaveLength(0);
  });

  it('forgets a request once its answer has ended: a late cancel aborts nothing', async () => {
    const body = JSON.stringify({ jsonrpc: '2.0', id: 5, result: { content: [] } });
    let signal: AbortSignal | undefined;
    const bounded = boundedFetch(1024, (url, init) => {
      if (bodyOf(init).includes('"id":5')) signal = init?.signal ?? undefined;
      return answering([body], 'application/json')(url);
    });
    expect(await (await bounded('http://upstream/mcp', { method: 'POST', body: request(5) })).json()).toEqual(JSON.parse(body));
    await bounded('http://upstream/mcp', { method: 'POST', body: cancel(5) });
    expect(signal?.aborted).toBe(false);
  });
});

/** An upstream whose POST answers end after a priming event `ev-<request id>`, and whose GETs that resume one `resume` answers; what it was asked. */
function resuming(resume: (lastEventId: string) => Response): { upstream: FetchLike; log: string[] } {
  const log: string[] = [];
  const upstream: FetchLike = (_url, init) => {
    if (init?.method === 'GET') {
      const last = new Headers(init.headers).get('last-event-id') ?? '';
      log.push(`GET ${last}`);
      return Promise.resolve(resume(last));
    }
    const { id } = JSON.parse(bodyOf(init)) as { id: number };
    log.push(`POST ${id}`);
    return Promise.resolve(new Response(`id: ev-${id}\ndata: \n\n`, { headers: { 'content-type': 'text/event-stream' } }));
  };
  return { upstream, log };
}

/** The GET with which the SDK's transport resumes a stream. */
const resumeAfter = (fetch: FetchLike, lastEventId: string): Promise<Response> =>
  fetch('http://upstream/mcp', { method: 'GET', headers: new Headers({ accept: 'text/event-stream', 'last-event-id': lastEventId }) });

/** The answers of the worker's own in an SSE text: each event's id and its request's, and what the error says. */
function madeUp(text: string): { eventId: string | undefined; id: unknown; what: string | undefined }[] {
  return text
    .split('\n\n')
    .filter((e) => e.includes('data: '))
    .map((e) => {
      const answer = JSON.parse(/^data: (.*)$/m.exec(e)?.[1] ?? '') as { id: unknown; error: { code: number; message: string; data: unknown } };
      return { eventId: /^id: (.*)$/m.exec(e)?.[1], id: answer.id, what: notAnAnswer(new McpError(answer.error.code, answer.error.message, answer.error.data)) };
    });
}

const sse = (body: string): Response => new Response(body, { headers: { 'content-type': 'text/event-stream' } });

describe('boundedFetch and a stream the transport resumes', () => {
  it("answers the requests of a stream whose resumption the upstream refuses (405, 500, not SSE) with the worker's own error; a resumption after that answer is not sent", async () => {
    for (const [refusal, said] of [
      [() => new Response(null, { status: 405 }), 'it answered HTTP 405'],
      [() => new Response('{"error":"no"}', { status: 500, headers: { 'content-type': 'application/json' } }), 'it answered HTTP 500'],
      [() => new Response('{}', { headers: { 'content-type': 'application/json' } }), 'it answered HTTP 200 without an SSE stream'],
    ] as const) {
      const { upstream, log } = resuming(refusal);
      const bounded = boundedFetch(1024, upstream);
      // The transport passes the priming event on, and resumes the stream after it.
      expect(await (await bounded('http://upstream/mcp', { method: 'POST', body: request(7) })).text()).toBe('id: ev-7\ndata: \n\n');
      const answered = await resumeAfter(bounded, 'ev-7');
      expect([answered.status, answered.headers.get('content-type')]).toEqual([200, 'text/event-stream']);
      const [answer, ...more] = madeUp(await answered.text());
      expect(more).toEqual([]);
      expect(answer?.id).toBe(7);
      expect(answer?.what).toContain(`ended without a response to the request, and the upstream refused to resume it (${said})`);
      // The transport resumes that stream too, after the id of its last event: answered here, as an upstream without a GET stream does.
      expect((await resumeAfter(bounded, answer?.eventId ?? '')).status).toBe(405);
      expect(log).toEqual(['POST 7', 'GET ev-7']);
      // Any other resumption is the upstream's.
      expect((await resumeAfter(bounded, 'ev-other')).status).toBe(refusal().status);
      expect(log).toEqual(['POST 7', 'GET ev-7', 'GET ev-other']);
    }
  });

  it("passes a resumed stream's response on; a resumed stream that ends without it answers the request with the worker's own error", async () => {
    const response = 'data: {"jsonrpc":"2.0","id":7,"result":{"content":[]}}\n\n';
    const bounded = boundedFetch(1024, resuming(() => sse(response)).upstream);
    await (await bounded('http://upstream/mcp', { method: 'POST', body: request(7) })).text();
    expect(await (await resumeAfter(bounded, 'ev-7')).text()).toBe(response);

    const { upstream, log } = resuming((last) => sse(last === 'ev-7' ? 'id: ev-8\ndata: \n\n' : 'data: not json\n\n'));
    const again = boundedFetch(1024, upstream);
    await (await again('http://upstream/mcp', { method: 'POST', body: request(7) })).text();
    // A resumed stream with an id of its own is resumed after it in turn.
    expect(await (await resumeAfter(again, 'ev-7')).text()).toBe('id: ev-8\ndata: \n\n');
    const ended = await (await resumeAfter(again, 'ev-8')).text();
    expect(ended.startsWith('data: not json\n\n')).toBe(true);
    const [answer, ...more] = madeUp(ended.slice('data: not json\n\n'.length));
    expect(more).toEqual([]);
    expect(answer).toMatchObject({ id: 7, what: expect.stringContaining('and its resumption ended without it too (it held 1 event, none of them the response)') as unknown });
    expect((await resumeAfter(again, answer?.eventId ?? '')).status).toBe(405);
    expect(log).toEqual(['POST 7', 'GET ev-7', 'GET ev-8']);
  });

  it('answers no request whose call ended (its cancel was sent) before the resumption', async () => {
    const { upstream } = resuming(() => new Response(null, { status: 405 }));
    const bounded = boundedFetch(1024, upstream);
    await (await bounded('http://upstream/mcp', { method: 'POST', body: request(7) })).text();
    await bounded('http://upstream/mcp', { method: 'POST', body: cancel(7) });
    // The upstream's own refusal, as the transport would have had it.
    expect((await resumeAfter(bounded, 'ev-7')).status).toBe(405);
  });
});
