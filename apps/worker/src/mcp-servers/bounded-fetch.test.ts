import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { tooLargeBytes } from './answer-lines.js';
import { boundedEvents, boundedFetch, requestIdsOf } from './bounded-fetch.js';

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
    const upstream = answering([body], 'application/json', 200, { 'content-length': declared });
    const original = await upstream('http://upstream/mcp');
    const passed = await boundedFetch(1024, () => Promise.resolve(original))('http://upstream/mcp', { method: 'POST', body: request(5) });
    expect(passed).toBe(original);
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

describe('requestIdsOf', () => {
  it('finds the ids of requests, not of notifications or answers, in one message or a batch', () => {
    expect(requestIdsOf(request(5))).toEqual([5]);
    expect(requestIdsOf(JSON.stringify([{ jsonrpc: '2.0', id: 'a', method: 'ping' }, { jsonrpc: '2.0', method: 'notifications/cancelled' }, { jsonrpc: '2.0', id: 9, result: {} }]))).toEqual(['a']);
    expect(requestIdsOf('not json')).toEqual([]);
    expect(requestIdsOf(undefined)).toEqual([]);
  });
});
