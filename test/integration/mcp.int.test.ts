import { randomUUID } from 'node:crypto';
import { FleetClient } from '@forge-fleet/client';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ErrorCode, McpError, type Progress, type Tool } from '@modelcontextprotocol/sdk/types.js';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FleetProcess, TestFleet } from '../fixtures/fleet.js';
import { redisUrl } from '../fixtures/redis.js';
import { until } from '../fixtures/wait.js';

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

/** The JSON-RPC messages of an event-stream body, one per event's `data:` line. */
const eventsOf = (text: string): Record<string, unknown>[] =>
  text
    .split('\n\n')
    .filter((e) => e.trim() !== '')
    .map((e) => JSON.parse(e.split('\n').find((l) => l.startsWith('data: '))!.slice('data: '.length)) as Record<string, unknown>);

describe('the fleet as an MCP server (official client, Streamable HTTP)', () => {
  const fleet = new TestFleet();
  let dispatcher: FleetProcess & { url: string };
  /** A second dispatcher of the same fleet, as behind a load balancer. */
  let other: FleetProcess & { url: string };
  let token: string;
  let approver: FleetClient;
  let redis: Redis;
  let rest: FleetClient;
  const clients: Client[] = [];
  const started = async (id: string) => (await redis.blpop(`${fleet.prefix}:test:started:{${id}}`, 10))?.[1];
  /**
   * Why the handler of call `id` saw its signal fire, once it has written it down: the call's record turns
   * `cancelled` as its run ends, which may be before the handler, still running, has written it.
   */
  const abortedReason = (id: string) => until(`the handler of ${id} to record its abort`, async () => (await redis.get(`${fleet.prefix}:test:aborted:{${id}}`)) ?? undefined);

  /** With `route`, each POST goes where it says (a load balancer's choice), whatever URL the transport holds. */
  async function connect(bearer: string, route?: (body: string) => string): Promise<Client> {
    const client = new Client({ name: 'forge-fleet-tests', version: '0.0.0' });
    const routed: typeof fetch = (input, init) => {
      const body = typeof init?.body === 'string' ? init.body : '';
      return fetch(route === undefined ? input : `${route(body)}/mcp`, init);
    };
    const transport = new StreamableHTTPClientTransport(new URL(`${dispatcher.url}/mcp`), { fetch: routed, requestInit: { headers: { authorization: `Bearer ${bearer}` } } });
    await client.connect(transport);
    clients.push(client);
    return client;
  }

  /**
   * Starts a `block` call, aborts the MCP request once the handler runs, and
   * checks that the fleet call ended cancelled with the handler's signal fired.
   */
  async function expectCancelledOnAbort(client: Client, idPrefix: string): Promise<void> {
    const id = `${idPrefix}-${randomUUID()}`;
    const controller = new AbortController();
    const rejected = client.callTool({ name: 'block', arguments: {}, _meta: { [CALL_ID]: id } }, undefined, { signal: controller.signal }).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(await started(id)).toBeDefined();
    controller.abort('the test gave up');
    expect(await rejected).toBeDefined();
    expect((await rest.get(id, { waitMs: 10_000 })).status).toBe('cancelled');
    expect(await abortedReason(id)).toContain('cancelled');
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
    [dispatcher, other] = await Promise.all([fleet.dispatcher({ FORGE_DEV_MODE: '0' }), fleet.dispatcher({ FORGE_DEV_MODE: '0' })]);
    token = await fleet.token({ subject: 'mcp-tests', grants: ['host_echo'] });
    rest = new FleetClient({ url: dispatcher.url, token });
    approver = new FleetClient({ url: other.url, token: await fleet.token({ subject: 'alice', role: 'approver' }) });
  });

  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close()));
    await Promise.all([rest?.close(), approver?.close()]);
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
    // The fleet's own words (as POST /v1/calls gives them), behind the one prefix the client's McpError adds.
    expect(error.message).toMatch(/^MCP error -32602: tool 'no_such_tool' not found; /);
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
    await expectCancelledOnAbort(await connect(token), 'mcp-cancel');
  });

  it("cancels only the cancelling client's call when two clients of one token have a request of the same id in flight", async () => {
    // Each official client numbers its requests from 0: both first calls are request 1.
    const [a, b] = [await connect(token), await connect(token)];
    const [idA, idB] = [`mcp-cancel-a-${randomUUID()}`, `mcp-cancel-b-${randomUUID()}`];
    const [abortA, abortB] = [new AbortController(), new AbortController()];
    const call = (client: Client, id: string, signal: AbortSignal) => client.callTool({ name: 'block', arguments: {}, _meta: { [CALL_ID]: id } }, undefined, { signal }).catch((error: unknown) => error);
    const [endedA, endedB] = [call(a, idA, abortA.signal), call(b, idB, abortB.signal)];
    expect(await started(idA)).toBeDefined();
    expect(await started(idB)).toBeDefined();
    abortA.abort('A gives up');
    await endedA;
    expect((await rest.get(idA, { waitMs: 10_000 })).status).toBe('cancelled');
    // B's call runs on: a status change within a second would have been B's cancellation.
    expect((await rest.get(idB, { waitMs: 1000 })).status).toBe('running');
    expect(await redis.get(`${fleet.prefix}:test:aborted:{${idB}}`)).toBeNull();
    abortB.abort('the test is done');
    await endedB;
    expect((await rest.get(idB, { waitMs: 10_000 })).status).toBe('cancelled');
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
    expect(seen.map((p) => p.progress)).toEqual(seen.map((_p, i) => i));
  });

  it("forwards the tool's own progress reports as notifications, in order and always increasing", async () => {
    const client = await connect(token);
    const id = `mcp-progress-${randomUUID()}`;
    const seen: Progress[] = [];
    // Each report lets the tool go on to its next step, so every report is observed before the next is made.
    const onprogress = (p: Progress): void => {
      seen.push(p);
      if (p.message?.startsWith('step ') === true) void redis.lpush(`${fleet.prefix}:test:release:{${id}}`, '1');
    };
    const result = await client.callTool({ name: 'stepped', arguments: { steps: 3 }, _meta: { [CALL_ID]: id } }, undefined, { onprogress });
    expect(result.isError).toBe(false);
    expect(result.structuredContent).toEqual({ steps: 3 });
    const steps = seen.filter((p) => p.message?.startsWith('step ') === true);
    expect(steps.map((p) => p.message)).toEqual(['step 1', 'step 2', 'step 3']);
    expect(seen[0]?.message).toBe('queued');
    // The final status comes last, after the tool's reports, and fills the bar.
    expect(seen.at(-1)).toMatchObject({ message: 'completed', total: seen.at(-1)?.progress });
    // The tool's numbers, shifted past the status notices sent before its first report; the last step is the whole.
    const last = steps.at(-1)!;
    expect(last.progress).toBe(last.total);
    expect(steps.map((p) => p.total)).toEqual([last.total, last.total, last.total]);
    expect(steps[1]!.progress - steps[0]!.progress).toBe(1);
    const values = seen.map((p) => p.progress);
    expect(values).toEqual([...values].sort((a, b) => a - b));
    expect(new Set(values).size).toBe(values.length);
  });

  it('holds a call that needs a person until an approver (on another dispatcher) decides, then answers with the outcome', async () => {
    const client = await connect(token);
    const [approved, denied] = [`mcp-approve-${randomUUID()}`, `mcp-deny-${randomUUID()}`];
    const seen: Progress[] = [];
    const call = (id: string, text: string) => client.callTool({ name: 'confirm_echo', arguments: { text }, _meta: { [CALL_ID]: id } }, undefined, { onprogress: (p) => seen.push(p) });
    const [first, second] = [call(approved, 'ship it'), call(denied, 'drop it')];
    const pending = (id: string) => until(`call ${id} to be listed as waiting for approval`, async () => (await approver.approvals()).find((a) => a.id === id));
    expect(await pending(approved)).toMatchObject({ tool: 'confirm_echo', arguments: { text: 'ship it' } });
    await pending(denied);
    expect(seen.map((p) => p.message)).toContain('awaiting_approval');
    await approver.decide(approved, { decision: 'approve' });
    await approver.decide(denied, { decision: 'deny', reason: 'not today' });
    const ok = await first;
    expect(ok.isError).toBe(false);
    expect(ok.structuredContent).toMatchObject({ echo: 'ship it', runs: 1 });
    const refused = await second;
    expect(refused.isError).toBe(true);
    expect(textOf(refused)).toContain('not today');
    expect(refused._meta?.['forge-fleet/error']).toMatchObject({ code: 'APPROVAL_DENIED' });
  });

  it('cancels the fleet call when the cancellation reaches another dispatcher than the one holding the request', async () => {
    // The load balancer sends the call to one dispatcher and the cancellation to the other.
    await expectCancelledOnAbort(await connect(token, (body) => (body.includes('notifications/cancelled') ? other.url : dispatcher.url)), 'mcp-cancel-elsewhere');
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
    const [answer] = eventsOf(await listed.text()) as { id?: unknown; result?: { tools?: { name: string }[] } }[];
    expect(answer?.id).toBe(1);
    expect(answer?.result?.tools?.map((t) => t.name)).toContain('echo');
    const stream = await fetch(`${dispatcher.url}/mcp`, { headers: { accept: 'text/event-stream', authorization: `Bearer ${token}` } });
    expect(stream.status).toBe(405);
    await stream.body?.cancel();
  });

  it('cancels the fleet call when the client hangs up before its answer, on both paths (plain call, and one with a progress token)', async () => {
    for (const meta of [{}, { progressToken: 'hang-up' }]) {
      const id = `mcp-hang-up-${randomUUID()}`;
      const controller = new AbortController();
      const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'block', arguments: {}, _meta: { [CALL_ID]: id, ...meta } } });
      const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${token}` };
      // The answer (or, with progress, the stream's end) never comes: the request is given up once the handler runs.
      const request = fetch(`${dispatcher.url}/mcp`, { method: 'POST', headers, body, signal: controller.signal }).then((r) => r.text());
      expect(await started(id)).toBeDefined();
      controller.abort();
      await expect(request).rejects.toThrow();
      expect((await rest.get(id, { waitMs: 10_000 })).status).toBe('cancelled');
      expect(await abortedReason(id)).toContain('cancelled');
    }
  });

  it("answers a plain tools/call (served without the SDK's transport) with the message the SDK's path answers, as one JSON body", async () => {
    // A progress token or a task sends a call through the SDK's server and transport, which answers with an event
    // stream; a plain call is answered directly (direct-call.ts) with the same JSON-RPC message as its whole
    // `application/json` body, the other framing Streamable HTTP allows.
    const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${token}` };
    const post = async (params: Record<string, unknown>, extra: Record<string, string> = {}) => {
      const response = await fetch(`${dispatcher.url}/mcp`, { method: 'POST', headers: { ...headers, ...extra }, body: JSON.stringify({ jsonrpc: '2.0', id: 'same-id', method: 'tools/call', params }) });
      return { status: response.status, type: response.headers.get('content-type'), text: await response.text() };
    };
    const idOf = (tag: string) => `${tag}-${randomUUID()}`;
    for (const args of [{ text: 'same answer' }, { text: 42 }]) {
      const plainId = idOf('plain');
      const sdkId = idOf('sdk');
      const plain = await post({ name: 'echo', arguments: args, _meta: { [CALL_ID]: plainId } }, { 'mcp-protocol-version': '2025-06-18' });
      const viaSdk = await post({ name: 'echo', arguments: args, _meta: { [CALL_ID]: sdkId, progressToken: 'p1' } }, { 'mcp-protocol-version': '2025-06-18' });
      expect(plain.status).toBe(200);
      expect(plain.type).toBe('application/json');
      expect(viaSdk.type).toMatch(/^text\/event-stream/);
      const plainAnswer = JSON.parse(plain.text) as Record<string, unknown>;
      expect(plainAnswer['id']).toBe('same-id');
      const sdkAnswer = eventsOf(viaSdk.text).find((m) => m['id'] === 'same-id');
      expect(sdkAnswer).toBeDefined();
      // The same answer but for the call ids each result names (the SDK re-parses a result, which orders its keys its own way).
      expect(JSON.parse(JSON.stringify(plainAnswer).replaceAll(plainId, 'ID'))).toEqual(JSON.parse(JSON.stringify(sdkAnswer).replaceAll(sdkId, 'ID')));
    }
    // What the transport refuses, it still refuses: a plain call with an unsupported protocol version or without the event-stream accept.
    const badVersion = await fetch(`${dispatcher.url}/mcp`, { method: 'POST', headers: { ...headers, 'mcp-protocol-version': '1999-01-01' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'echo', arguments: { text: 'x' } } }) });
    expect(badVersion.status).toBe(400);
    expect(await badVersion.text()).toContain('Unsupported protocol version');
    const jsonOnly = await fetch(`${dispatcher.url}/mcp`, { method: 'POST', headers: { ...headers, accept: 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'echo', arguments: { text: 'x' } } }) });
    expect(jsonOnly.status).toBe(406);
    await jsonOnly.body?.cancel();
  });
});
