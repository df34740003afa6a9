import { StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { FetchLike } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { ModernHttpTransport, sseData } from './modern-http-transport.js';

type Wire = Record<string, unknown>;

function streamOf(...chunks: string[]): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  return new ReadableStream({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(encoder.encode(chunk));
      controller.close();
    },
  });
}

async function all(body: ReadableStream<Uint8Array>): Promise<string[]> {
  const out: string[] = [];
  for await (const data of sseData(body)) out.push(data);
  return out;
}

/** A transport whose upstream is `answer`, with what it was sent, delivered and reported. */
function transport(
  answer: (body: Wire, headers: Headers, signal: AbortSignal | undefined) => Response | Promise<Response>,
  fileHeaders: Record<string, string> = { authorization: 'Bearer k' },
  paramHeaders?: ConstructorParameters<typeof ModernHttpTransport>[3],
) {
  const sent: { body: Wire; headers: Headers }[] = [];
  const fetch: FetchLike = async (_url, init) => {
    const body = JSON.parse(init?.body as string) as Wire;
    const headers = new Headers(init?.headers);
    sent.push({ body, headers });
    return answer(body, headers, init?.signal ?? undefined);
  };
  const t = new ModernHttpTransport(new URL('http://upstream.test/mcp'), fileHeaders, fetch, paramHeaders);
  const delivered: Wire[] = [];
  const errors: Error[] = [];
  t.onmessage = (m) => delivered.push(m);
  t.onerror = (e) => errors.push(e);
  return { t, sent, delivered, errors };
}

const json = (value: unknown, status = 200): Response => new Response(JSON.stringify(value), { status, headers: { 'content-type': 'application/json' } });
const call = (id: number, name = 'add'): JSONRPCMessage => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: { a: 1 } } });

describe('sseData', () => {
  it('yields the data of each message event, whatever the line ends and however the chunks split them', async () => {
    expect(await all(streamOf('data: one\n\n', 'data: two\r\n\r\n', 'data: three\r\rdata: fo', 'ur\n', '\n'))).toEqual(['one', 'two', 'three', 'four']);
    // A CRLF split across chunks is one line end, not two (which would end the event early).
    expect(await all(streamOf('data: a\r', '\ndata: b\r', '\n\r', '\n'))).toEqual(['a\nb']);
  });

  it('joins data lines, skips comments, other event types, ids and events without data, and keeps a colon-less field', async () => {
    expect(await all(streamOf(': keep-alive\n\n', 'id: 7\nretry: 10\n\n', 'event: ping\ndata: no\n\n', 'event: message\ndata:x\ndata: y\n\n', 'data\n\n'))).toEqual(['x\ny', '']);
  });

  it('drops an event the stream ends in the middle of', async () => {
    expect(await all(streamOf('data: whole\n\n', 'data: cut'))).toEqual(['whole']);
  });
});

describe('ModernHttpTransport', () => {
  it("posts each request with the revision's headers and the configured ones, its answer delivered", async () => {
    const { t, sent, delivered } = transport((body) => json({ jsonrpc: '2.0', id: body.id, result: { content: [] } }));
    await t.send(call(1));
    expect(sent[0]?.body).toMatchObject({ id: 1, method: 'tools/call', params: { _meta: { 'io.modelcontextprotocol/protocolVersion': '2026-07-28' } } });
    const headers = sent[0]?.headers;
    expect(headers?.get('mcp-protocol-version')).toBe('2026-07-28');
    expect(headers?.get('mcp-method')).toBe('tools/call');
    expect(headers?.get('mcp-name')).toBe('add');
    expect(headers?.get('authorization')).toBe('Bearer k');
    expect(headers?.get('accept')).toBe('application/json, text/event-stream');
    expect(delivered).toEqual([{ jsonrpc: '2.0', id: 1, result: { content: [] } }]);
  });

  it('sends the arguments a listed tool declares as headers on its calls', async () => {
    const { t, sent } = transport((body) =>
      body.method === 'tools/list'
        ? json({ jsonrpc: '2.0', id: body.id, result: { tools: [{ name: 'where', inputSchema: { type: 'object', properties: { region: { type: 'string', 'x-mcp-header': 'Region' } } } }] } })
        : json({ jsonrpc: '2.0', id: body.id, result: { content: [] } }),
    );
    await t.send({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} });
    await t.send({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'where', arguments: { region: 'eu' } } });
    await t.send({ jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'other', arguments: { region: 'eu' } } });
    expect(sent[1]?.headers.get('mcp-param-region')).toBe('eu');
    expect(sent[2]?.headers.get('mcp-param-region')).toBeNull();
  });

  it("keeps the revision's headers over the file's, whatever their case", async () => {
    const { t, sent } = transport((body) => json({ jsonrpc: '2.0', id: body.id, result: {} }), { 'MCP-Protocol-Version': '1999-01-01', Accept: 'text/html', 'Mcp-Name': 'other', 'X-Team': 'a' });
    await t.send(call(1));
    const headers = sent[0]?.headers;
    expect(headers?.get('mcp-protocol-version')).toBe('2026-07-28');
    expect(headers?.get('accept')).toBe('application/json, text/event-stream');
    expect(headers?.get('mcp-name')).toBe('add');
    expect(headers?.get('x-team')).toBe('a');
  });

  it('shares what one connection listed with the others given the same declarations', async () => {
    const shared = new Map();
    const answer = (body: Wire): Response =>
      body.method === 'tools/list'
        ? json({ jsonrpc: '2.0', id: body.id, result: { tools: [{ name: 'where', inputSchema: { type: 'object', properties: { region: { type: 'string', 'x-mcp-header': 'Region' } } } }] } })
        : json({ jsonrpc: '2.0', id: body.id, result: { content: [] } });
    const lister = transport(answer, {}, shared);
    const caller = transport(answer, {}, shared);
    await lister.t.send({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} });
    await caller.t.send({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'where', arguments: { region: 'eu' } } });
    expect(caller.sent[0]?.headers.get('mcp-param-region')).toBe('eu');
  });

  it("delivers the JSON-RPC error an error status carries for the request as the request's answer", async () => {
    const { t, delivered, errors } = transport((body) => json({ jsonrpc: '2.0', id: body.id, error: { code: -32602, message: 'bad arguments' } }, 400));
    await t.send(call(5));
    expect(delivered).toEqual([{ jsonrpc: '2.0', id: 5, error: { code: -32602, message: 'bad arguments' } }]);
    expect(errors).toEqual([]);
  });

  it('fails the send, and reports it, for an error status without an answer for the request (another id included)', async () => {
    for (const response of [() => new Response('<html>bad gateway</html>', { status: 502 }), () => json({ jsonrpc: '2.0', id: 99, error: { code: 1, message: 'not yours' } }, 400)]) {
      const { t, delivered, errors } = transport(response);
      const failure = await t.send(call(1)).catch((e: unknown) => e);
      expect(failure).toBeInstanceOf(StreamableHTTPError);
      expect(errors).toEqual([failure]);
      expect(delivered).toEqual([]);
    }
  });

  it("reads an SSE answer: progress then the answer delivered, the stream left once answered", async () => {
    let cancelled = false;
    const { t, delivered, errors } = transport((body) => {
      const encoder = new TextEncoder();
      const events = [
        { jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 'p', progress: 1 } },
        { jsonrpc: '2.0', id: body.id, result: { content: [] } },
      ];
      const stream = new ReadableStream<Uint8Array>({
        start(controller) {
          for (const e of events) controller.enqueue(encoder.encode(`event: message\ndata: ${JSON.stringify(e)}\n\n`));
          // Left open: the transport must not wait for its end.
        },
        cancel() {
          cancelled = true;
        },
      });
      return new Response(stream, { headers: { 'content-type': 'text/event-stream' } });
    });
    await t.send(call(1));
    await expect.poll(() => delivered.length).toBe(2);
    expect(delivered[1]).toEqual({ jsonrpc: '2.0', id: 1, result: { content: [] } });
    await expect.poll(() => cancelled).toBe(true);
    expect(errors).toEqual([]);
  });

  it("drops an answer for another request on a request's POST: one call's answer cannot settle another's", async () => {
    const forged = { jsonrpc: '2.0', id: 2, result: { content: [{ type: 'text', text: 'forged' }] } };
    const { t, delivered } = transport((body) =>
      body.id === 1
        ? new Response(streamOf(`data: ${JSON.stringify(forged)}\n\n`, `data: ${JSON.stringify({ jsonrpc: '2.0', id: 1, result: {} })}\n\n`), { headers: { 'content-type': 'text/event-stream' } })
        : json([forged, { jsonrpc: '2.0', id: 3, result: {} }]),
    );
    await t.send(call(1));
    await expect.poll(() => delivered.length).toBe(1);
    await t.send(call(3));
    expect(delivered).toEqual([
      { jsonrpc: '2.0', id: 1, result: {} },
      { jsonrpc: '2.0', id: 3, result: {} },
    ]);
  });

  it("reports a stream that breaks off once, as a disconnection", async () => {
    const { t, errors } = transport(() => {
      const stream = new ReadableStream<Uint8Array>({
        pull(controller) {
          controller.error(new Error('socket hang up'));
        },
      });
      return new Response(stream, { headers: { 'content-type': 'text/event-stream' } });
    });
    await t.send(call(1));
    await expect.poll(() => errors.length).toBe(1);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(errors.map((e) => e.message)).toEqual(['SSE stream disconnected: socket hang up']);
  });

  it("reports a request's stream that ends before its answer as a disconnection", async () => {
    const { t, errors } = transport(() => new Response(streamOf('data: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}\n\n'), { headers: { 'content-type': 'text/event-stream' } }));
    await t.send(call(1));
    await expect.poll(() => errors.map((e) => e.message)).toEqual(['SSE stream disconnected: the upstream ended the stream before it answered']);
  });

  it("cancels a request by aborting its POST, quietly: no cancel is posted, nothing reported", async () => {
    let aborted = false;
    const { t, sent, errors } = transport(
      (_body, _headers, signal) =>
        new Promise<Response>((_resolve, reject) => {
          signal?.addEventListener('abort', () => {
            aborted = true;
            reject(new DOMException('aborted', 'AbortError'));
          });
        }),
    );
    const running = t.send(call(1));
    await expect.poll(() => sent.length).toBe(1);
    await t.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 1, reason: 'caller gave up' } });
    await running;
    expect(aborted).toBe(true);
    expect(sent).toHaveLength(1);
    expect(errors).toEqual([]);
  });

  it('aborts what is in flight on close, and refuses sends after it', async () => {
    let aborted = 0;
    const { t, errors } = transport(
      (_body, _headers, signal) =>
        new Promise<Response>((_resolve, reject) => {
          signal?.addEventListener('abort', () => {
            aborted += 1;
            reject(new DOMException('aborted', 'AbortError'));
          });
        }),
    );
    let closed = false;
    t.onclose = () => (closed = true);
    const running = [t.send(call(1)), t.send(call(2))];
    await new Promise((resolve) => setTimeout(resolve, 10));
    await t.close();
    await Promise.all(running);
    expect(aborted).toBe(2);
    expect(closed).toBe(true);
    expect(errors).toEqual([]);
    await expect(t.send(call(3))).rejects.toThrow('Not connected');
  });

  it('reports an upstream that cannot be reached and fails the send with its error', async () => {
    const down = new TypeError('fetch failed');
    const { t, errors } = transport(() => Promise.reject(down));
    await expect(t.send(call(1))).rejects.toBe(down);
    expect(errors).toEqual([down]);
  });
});
