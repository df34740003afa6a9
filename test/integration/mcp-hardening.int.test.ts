import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { FleetClient } from '@forge-fleet/client';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, ErrorCode, McpError, type Progress } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BURST } from '../fixtures/progress-tools.js';
import { type FleetProcess, ROOT, TestFleet } from '../fixtures/fleet.js';

const CALL_ID = 'forge-fleet/callId';
const PROGRESS_TOOLS = join(ROOT, 'test', 'fixtures', 'progress-tools.ts');

/** One JSON-RPC message out of an answer: the JSON body, or the first `data:` line of an event stream. */
interface Answer {
  readonly status: number;
  readonly contentType: string | null;
  readonly body: { jsonrpc?: string; id?: unknown; error?: { code: number; message: string; data?: unknown }; result?: unknown } | undefined;
  readonly text: string;
}

/**
 * What the MCP conformance review sent by hand: bodies no SDK client would
 * send, and the answers the JSON-RPC and MCP specs give them.
 */
describe('/mcp refuses what does not fit with the JSON-RPC error the spec names', () => {
  const fleet = new TestFleet();
  let dispatcher: FleetProcess & { url: string };
  let token: string;
  let rest: FleetClient;
  const clients: Client[] = [];

  async function post(body: string, headers: Record<string, string> = {}): Promise<Answer> {
    const response = await fetch(`${dispatcher.url}/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${token}`, ...headers },
      body,
    });
    const text = await response.text();
    const contentType = response.headers.get('content-type');
    const json = contentType?.startsWith('text/event-stream') === true ? text.split('\n').find((l) => l.startsWith('data: '))?.slice('data: '.length) : text;
    return { status: response.status, contentType, text, body: json === undefined || json === '' ? undefined : (JSON.parse(json) as Answer['body']) };
  }

  const request = (method: string, params?: unknown, id: unknown = 1) => JSON.stringify({ jsonrpc: '2.0', id, method, ...(params === undefined ? {} : { params }) });

  /** A one-line message that says what to fix: no zod issue dump (JSON arrays, `"code":`, newlines). */
  function expectOneLine(message: string | undefined, mentions: RegExp): void {
    expect(message).toMatch(mentions);
    expect(message).not.toMatch(/\n|"code"|"path"|^\s*\[/);
    expect(message!.length).toBeLessThan(300);
  }

  async function connect(): Promise<Client> {
    const client = new Client({ name: 'forge-fleet-hardening', version: '0.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${dispatcher.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
    clients.push(client);
    return client;
  }

  beforeAll(async () => {
    await fleet.worker({ tier: 'platform', tools: PROGRESS_TOOLS });
    dispatcher = await fleet.dispatcher({ FORGE_DEV_MODE: '0' });
    token = await fleet.token({ subject: 'mcp-hardening' });
    rest = new FleetClient({ url: dispatcher.url, token });
  });

  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close()));
    await rest?.close();
    await fleet.stopAll();
  });

  it('answers tools/call without params.name with -32602 Invalid params and a one-line message (official client)', async () => {
    const client = await connect();
    const error = await client.request({ method: 'tools/call', params: { arguments: {} } }, CallToolResultSchema).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(McpError);
    expect((error as McpError).code).toBe(ErrorCode.InvalidParams);
    expectOneLine((error as McpError).message, /name/);
  });

  it.each([
    ['tools/call without params', 'tools/call', undefined, /name/],
    ['tools/call without a name', 'tools/call', { arguments: {} }, /name/],
    ['tools/call with a number for a name', 'tools/call', { name: 5 }, /name/],
    ['tools/call with arguments that are an array', 'tools/call', { name: 'progress_burst', arguments: [1] }, /arguments/],
    ['tools/call with arguments that are a string', 'tools/call', { name: 'progress_burst', arguments: 'x' }, /arguments/],
    ['tools/call with null arguments', 'tools/call', { name: 'progress_burst', arguments: null }, /arguments/],
    ['tools/call with params that are a number', 'tools/call', 5, /params/],
    ['tools/call with a progress token that is an object', 'tools/call', { name: 'progress_burst', _meta: { progressToken: {} } }, /progressToken/],
    ['tools/list with a number for a cursor', 'tools/list', { cursor: 5 }, /cursor/],
    ['initialize without clientInfo', 'initialize', { protocolVersion: '2025-06-18', capabilities: {} }, /clientInfo/],
    ['ping with params that are an array', 'ping', [], /params/],
  ])('answers %s with -32602 and its id', async (_what, method, params, mentions) => {
    const answer = await post(request(method, params, 'req-1'));
    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({ jsonrpc: '2.0', id: 'req-1', error: { code: ErrorCode.InvalidParams } });
    expectOneLine(answer.body?.error?.message, mentions);
  });

  it('answers an unknown method with -32601 naming the methods it serves', async () => {
    const answer = await post(request('resources/list', {}));
    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({ id: 1, error: { code: ErrorCode.MethodNotFound } });
    expectOneLine(answer.body?.error?.message, /tools\/call/);
  });

  it('answers a body that is not JSON with 400 and -32700 Parse error', async () => {
    for (const body of ['{"jsonrpc": "2.0", "id": 1, "method": ', 'not json', '']) {
      const answer = await post(body);
      expect(answer.status, body).toBe(400);
      expect(answer.body, body).toMatchObject({ jsonrpc: '2.0', id: null, error: { code: ErrorCode.ParseError } });
    }
  });

  it.each([
    ['an empty batch', '[]'],
    ['a number', '1'],
    ['a string', '"tools/list"'],
    ['null', 'null'],
    ['true', 'true'],
    ['a batch of a number', '[1]'],
    ['an empty object', '{}'],
    ['a request of JSON-RPC 1.0', JSON.stringify({ jsonrpc: '1.0', id: 1, method: 'ping' })],
    ['a request whose method is a number', JSON.stringify({ jsonrpc: '2.0', id: 1, method: 7 })],
    ['a request whose id is an object', JSON.stringify({ jsonrpc: '2.0', id: {}, method: 'ping' })],
    ['a message with unknown members', JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping', extra: true })],
    ['a `__proto__` key', '{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"__proto__": {"x": 1}}}'],
  ])('answers %s with 400 and -32600 Invalid Request, never 202', async (_what, body) => {
    const answer = await post(body);
    expect(answer.status).toBe(400);
    expect(answer.contentType).toMatch(/^application\/json/);
    // JSON-RPC 2.0: the id of an Invalid Request is null.
    expect(answer.body).toMatchObject({ jsonrpc: '2.0', id: null, error: { code: ErrorCode.InvalidRequest } });
    expectOneLine(answer.body?.error?.message, /./);
  });

  it.each([
    ['`__proto__`', '{"text": "hi", "__proto__": {"polluted": true}}'],
    ['`constructor.prototype`', '{"text": "hi", "constructor": {"prototype": {"polluted": true}}}'],
    ['a nested `__proto__`', '{"deep": [{"__proto__": {"polluted": true}}]}'],
  ])('answers a tools/call whose arguments hold %s as POST /v1/calls does: BAD_REQUEST naming the key, and nothing runs', async (_what, args) => {
    const viaMcp = await post(`{"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "echo", "arguments": ${args}}}`);
    const viaHttp = await fetch(`${dispatcher.url}/v1/calls`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: `{"name": "echo", "arguments": ${args}}`,
    });
    const httpError = ((await viaHttp.json()) as { error: { code: string; message: string } }).error;
    expect(viaHttp.status).toBe(400);
    expect(httpError.code).toBe('BAD_REQUEST');
    expect(viaMcp.status).toBe(200);
    const result = (viaMcp.body as unknown as { id: unknown; result: { isError: boolean; content: Array<{ text: string }>; structuredContent?: { error?: { code: string; message: string } } } }).result;
    expect((viaMcp.body as unknown as { id: unknown }).id).toBe(9);
    expect(result.isError).toBe(true);
    expect(result.content[0]?.text).toContain(httpError.message);
    expect(({} as Record<string, unknown>)['polluted']).toBeUndefined();
  });

  it('refuses any batch from a client that speaks MCP 2025-06-18 or later (batching was removed), and serves one from a 2025-03-26 client', async () => {
    const batch = JSON.stringify([JSON.parse(request('ping', undefined, 1)), JSON.parse(request('ping', undefined, 2))]);
    for (const version of ['2025-06-18', '2025-11-25']) {
      const refused = await post(batch, { 'mcp-protocol-version': version });
      expect(refused.status, version).toBe(400);
      expect(refused.body, version).toMatchObject({ id: null, error: { code: ErrorCode.InvalidRequest } });
      expectOneLine(refused.body?.error?.message, /one JSON-RPC message/);
    }
    const legacy = await post(batch, { 'mcp-protocol-version': '2025-03-26' });
    expect(legacy.status).toBe(200);
    const answers = legacy.text.split('\n').filter((l) => l.startsWith('data: ')).map((l) => JSON.parse(l.slice('data: '.length)) as { id: number; result?: unknown });
    expect(answers.map((a) => a.id).sort()).toEqual([1, 2]);
    expect(answers.every((a) => a.result !== undefined)).toBe(true);
  });

  it('refuses a notification whose params do not fit (400, -32602) and still accepts a good one (202)', async () => {
    const bad = await post(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: { not: 'an id' } } }));
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ error: { code: ErrorCode.InvalidParams } });
    expectOneLine(bad.body?.error?.message, /requestId/);
    const good = await post(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
    expect(good.status).toBe(202);
    expect(good.text).toBe('');
  });

  it('still answers the requests it serves', async () => {
    const listed = await post(request('tools/list', {}));
    expect(listed.status).toBe(200);
    expect(listed.body).toMatchObject({ id: 1, result: { tools: [expect.objectContaining({ name: 'progress_burst' })] } });
    const pinged = await post(request('ping'));
    expect(pinged.body).toMatchObject({ id: 1, result: {} });
  });

  describe('progress of a tool that reports faster than the worker passes reports on (0, 50, 100 over ~100 ms)', () => {
    it('reaches an MCP client as increasing notices: the tool’s first and last report, then the final status', async () => {
      const client = await connect();
      const id = `burst-${randomUUID()}`;
      const seen: Progress[] = [];
      const result = await client.callTool({ name: 'progress_burst', arguments: {}, _meta: { [CALL_ID]: id } }, undefined, { onprogress: (p) => seen.push(p) });
      expect(result.isError).toBe(false);
      const values = seen.map((p) => p.progress);
      // MCP: `progress` MUST increase with each notification.
      for (let i = 1; i < values.length; i++) expect(values[i], JSON.stringify(seen)).toBeGreaterThan(values[i - 1]!);
      const messages = seen.map((p) => p.message);
      expect(messages[0]).toBe('queued');
      expect(messages.at(-1)).toBe('completed');
      // The tool's reports that reached the client: in the order made, the first (its 0) and the last among them.
      const reports = seen.filter((p) => BURST.some((b) => b.message === p.message));
      const made = BURST.map((b) => b.message);
      expect(reports.map((p) => p.message)).toEqual(made.filter((m) => reports.some((p) => p.message === m)));
      expect(reports[0]?.message, JSON.stringify(seen)).toBe('starting');
      expect(reports.at(-1)?.message, JSON.stringify(seen)).toBe('done');
      // Shifted past the status notices, the tool's own scale: its last report fills the bar, and so does the end.
      const last = reports.at(-1)!;
      expect(last.progress).toBe(last.total);
      expect(reports.every((p) => p.total === last.total)).toBe(true);
      const end = seen.at(-1)!;
      expect(end.progress).toBe(end.total);
    });

    it("keeps the tool's last report on the call's record, for HTTP readers", async () => {
      const id = `burst-http-${randomUUID()}`;
      const view = await rest.submit('progress_burst', {}, { id, waitMs: 10_000 });
      expect(view.status).toBe('completed');
      expect((await rest.get(id)).progress).toMatchObject({ progress: 100, total: 100, message: 'done' });
    });
  });
});
