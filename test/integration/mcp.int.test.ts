import { randomUUID } from 'node:crypto';
import { FleetClient } from '@forge-fleet/client';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ErrorCode, McpError, type Progress, type Tool } from '@modelcontextprotocol/sdk/types.js';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FleetProcess, TestFleet } from '../fixtures/fleet.js';
import { redisUrl } from '../fixtures/redis.js';

/** The fleet call id a client may choose (and results carry) in `_meta`. */
const CALL_ID = 'forge-fleet/callId';

async function mcpError(promise: Promise<unknown>): Promise<McpError> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof McpError) return error;
    throw error;
  }
  throw new Error('expected a JSON-RPC error');
}

/** The text of a result's one content block (`callTool`'s answer type also admits the pre-2024 `toolResult` shape). */
const textOf = (result: object): string => {
  const [first] = (result as { content?: { type: string; text: string }[] }).content ?? [];
  expect(first?.type).toBe('text');
  return first?.text ?? '';
};

describe('the fleet as an MCP server (official client, Streamable HTTP)', () => {
  const fleet = new TestFleet();
  let dispatcher: FleetProcess & { url: string };
  let token: string;
  let redis: Redis;
  let rest: FleetClient;
  const clients: Client[] = [];
  const started = async (id: string) => (await redis.blpop(`${fleet.prefix}:test:started:{${id}}`, 10))?.[1];

  async function connect(bearer: string): Promise<Client> {
    const client = new Client({ name: 'forge-fleet-tests', version: '0.0.0' });
    const transport = new StreamableHTTPClientTransport(new URL(`${dispatcher.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${bearer}` } } });
    await client.connect(transport);
    clients.push(client);
    return client;
  }

  async function listAll(client: Client): Promise<{ tools: Tool[]; pages: number }> {
    const tools: Tool[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const page = await client.listTools(cursor === undefined ? {} : { cursor });
      tools.push(...page.tools);
      cursor = page.nextCursor;
      pages += 1;
    } while (cursor !== undefined);
    return { tools, pages };
  }

  beforeAll(async () => {
    redis = new Redis(redisUrl());
    await Promise.all([fleet.worker({ tier: 'platform' }), fleet.worker({ tier: 'host' })]);
    dispatcher = await fleet.dispatcher({ FORGE_DEV_MODE: '0' });
    token = await fleet.token({ subject: 'mcp-tests', grants: ['host_echo'] });
    rest = new FleetClient({ url: dispatcher.url, token });
  });

  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close()));
    await rest?.close();
    redis?.disconnect();
    await fleet.stopAll();
  });

  it('lists every live tool once, sorted by name, with derived annotations', async () => {
    const client = await connect(token);
    const { tools } = await listAll(client);
    const names = tools.map((t) => t.name);
    const expected = (await rest.tools()).map((t) => t.name).sort();
    expect(names).toEqual(expected);
    expect(new Set(names).size).toBe(names.length);
    expect(names).toEqual(expect.arrayContaining(['block', 'count', 'echo', 'host_echo']));
    const byName = new Map(tools.map((t) => [t.name, t]));
    expect(byName.get('count')?.inputSchema).toMatchObject({ type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] });
    expect(byName.get('echo')?.annotations).toEqual({ readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false });
    expect(byName.get('host_echo')?.annotations).toMatchObject({ destructiveHint: true, openWorldHint: true });
    expect(byName.get('guess')?.annotations).toMatchObject({ readOnlyHint: true, destructiveHint: false });
    expect(byName.get('flaky')?.annotations).toMatchObject({ idempotentHint: true });
    expect(byName.get('confirm_first')?.annotations).toMatchObject({ destructiveHint: true, openWorldHint: false });
  });

  it("filters the listing by the token's scope", async () => {
    const scoped = await connect(await fleet.token({ subject: 'mcp-scoped', scope: ['echo', 'count'] }));
    const { tools } = await listAll(scoped);
    expect(tools.map((t) => t.name)).toEqual(['count', 'echo']);
  });

  it('calls a tool through the pipeline: text content, structured content and the fleet call id', async () => {
    const client = await connect(token);
    const result = await client.callTool({ name: 'echo', arguments: { hello: 'mcp' } });
    expect(result.isError).toBe(false);
    expect(result.structuredContent).toMatchObject({ echo: { hello: 'mcp' } });
    expect(JSON.parse(textOf(result))).toMatchObject({ echo: { hello: 'mcp' } });
    const id = result._meta?.[CALL_ID];
    expect(typeof id).toBe('string');
    expect(await rest.get(String(id))).toMatchObject({ status: 'completed', result: { isError: false } });
  });

  it('answers invalid arguments with an isError result carrying the validation message', async () => {
    const client = await connect(token);
    const result = await client.callTool({ name: 'count', arguments: { n: 'one' } });
    expect(result.isError).toBe(true);
    expect(result._meta?.['forge-fleet/error']).toMatchObject({ code: 'SCHEMA_VALIDATION', details: { path: '/n' } });
    expect(textOf(result)).toMatch(/\/n/);
    expect(textOf(result)).toBe((result._meta?.['forge-fleet/error'] as { message: string }).message);
  });

  it('answers an unknown tool with a JSON-RPC error (-32602 Invalid params, TOOL_NOT_FOUND)', async () => {
    const client = await connect(token);
    const error = await mcpError(client.callTool({ name: 'no_such_tool', arguments: {} }));
    expect(error.code).toBe(ErrorCode.InvalidParams);
    expect(error.data).toMatchObject({ code: 'TOOL_NOT_FOUND' });
  });

  it('answers an out-of-scope tool with a JSON-RPC error (-32602 Invalid params, OUT_OF_SCOPE)', async () => {
    const scoped = await connect(await fleet.token({ subject: 'mcp-scoped', scope: ['echo', 'count'], grants: ['host_echo'] }));
    const error = await mcpError(scoped.callTool({ name: 'host_echo', arguments: {} }));
    expect(error.code).toBe(ErrorCode.InvalidParams);
    expect(error.data).toMatchObject({ code: 'OUT_OF_SCOPE' });
  });

  it('answers a host tool called without a grant with an isError result (APPROVAL_DENIED)', async () => {
    const ungranted = await connect(await fleet.token({ subject: 'mcp-ungranted' }));
    const result = await ungranted.callTool({ name: 'host_echo', arguments: {} });
    expect(result.isError).toBe(true);
    expect(result._meta?.['forge-fleet/error']).toMatchObject({ code: 'APPROVAL_DENIED' });
    expect(textOf(result).length).toBeGreaterThan(0);
  });

  it('cancels the fleet call when the MCP request is cancelled', async () => {
    const client = await connect(token);
    const id = `mcp-cancel-${randomUUID()}`;
    const controller = new AbortController();
    const call = client.callTool({ name: 'block', arguments: {}, _meta: { [CALL_ID]: id } }, undefined, { signal: controller.signal });
    const rejected = call.then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(await started(id)).toBeDefined();
    controller.abort('the test gave up');
    expect(await rejected).toBeDefined();
    // The worker saw its handler's signal fire, and the call ended cancelled.
    expect((await rest.get(id, { waitMs: 10_000 })).status).toBe('cancelled');
    expect(await redis.get(`${fleet.prefix}:test:aborted:{${id}}`)).toContain('cancelled');
  });

  it('sends progress notifications for the statuses it observes when the client asks for them', async () => {
    const client = await connect(token);
    const seen: Progress[] = [];
    const result = await client.callTool({ name: 'echo', arguments: { n: 1 } }, undefined, { onprogress: (p) => seen.push(p) });
    expect(result.isError).toBe(false);
    const messages = seen.map((p) => p.message);
    expect(messages.length).toBeGreaterThanOrEqual(2);
    expect(messages[0]).toBe('queued');
    expect(messages.at(-1)).toBe('completed');
    for (const message of messages.slice(1, -1)) expect(['queued', 'running']).toContain(message);
    expect(seen.map((p) => p.progress)).toEqual(seen.map((_p, i) => i + 1));
  });

  it('answers a bare POST of tools/list, refuses one without a token (401), and serves no GET stream (405)', async () => {
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} });
    const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
    const refused = await fetch(`${dispatcher.url}/mcp`, { method: 'POST', headers, body });
    expect(refused.status).toBe(401);
    expect(await refused.json()).toMatchObject({ error: { code: 'UNAUTHENTICATED' } });
    // The README's curl: one stateless POST, no initialize, answered as an event stream.
    const listed = await fetch(`${dispatcher.url}/mcp`, { method: 'POST', headers: { ...headers, authorization: `Bearer ${token}` }, body });
    expect(listed.status).toBe(200);
    expect(listed.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const event = (await listed.text()).split('\n').find((line) => line.startsWith('data: '));
    const answer = JSON.parse(event?.slice('data: '.length) ?? '{}') as { id?: unknown; result?: { tools?: { name: string }[] } };
    expect(answer.id).toBe(1);
    expect(answer.result?.tools?.map((t) => t.name)).toContain('echo');
    const stream = await fetch(`${dispatcher.url}/mcp`, { headers: { accept: 'text/event-stream', authorization: `Bearer ${token}` } });
    expect(stream.status).toBe(405);
    await stream.body?.cancel();
  });
});
