import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync, readlinkSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { fileURLToPath } from 'node:url';
import { FleetClient } from '@forge-fleet/client';
import { freePort } from '@forge-fleet/local-redis';
import { CallView, type ToolResult } from '@forge-fleet/shared';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Progress, Tool } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allProcesses } from '../fixtures/mcp/processes.js';
import { ENTRIES, McpTestDir } from '../fixtures/mcp/servers-files.js';
import { PYTHON_IMAGE_PNG } from '../fixtures/mcp/python-server.js';
import { type FleetProcess, TestFleet } from '../fixtures/fleet.js';
import { progressed, until } from '../fixtures/wait.js';

/**
 * Real MCP servers run by a real fleet: the npm servers (filesystem in the
 * Platform sandbox, memory with a session per caller, everything) and a
 * Python server the tests write, called through HTTP, FleetClient and the
 * fleet's own `/mcp` with the official client.
 */

/** The fleet call id a client may choose (and results carry) in `_meta`. */
const CALL_ID = 'forge-fleet/callId';

/** Long enough for any single call here; below the integration tier's 30 s test timeout. */
const CALL_TIMEOUT_MS = 20_000;

/** What the fleet's /mcp sends as progress for a call's own statuses (not the tool's reports). */
const STATUS_NOTICES = new Set(['queued', 'running', 'awaiting_approval', 'completed', 'failed', 'cancelled']);

/** A server of the v2 SDK that refuses 2025-era clients: MCP 2026-07-28 only (`legacy: 'reject'`). */
const MODERN_SERVER = fileURLToPath(new URL('../../apps/worker/test/fixtures/mcp-v2-server.mjs', import.meta.url));

const byName = <T extends { name: string }>(tools: readonly T[]): Map<string, T> => new Map(tools.map((t) => [t.name, t]));

/** Every tool of an MCP client's listing, following pages. */
async function listAll(client: Client): Promise<Tool[]> {
  const tools: Tool[] = [];
  let cursor: string | undefined;
  do {
    const page = await client.listTools(cursor === undefined ? {} : { cursor });
    tools.push(...page.tools);
    cursor = page.nextCursor;
  } while (cursor !== undefined);
  return tools;
}

/** The content blocks of an MCP result (`callTool`'s type also admits the pre-2024 `toolResult` shape). */
function contentOf(result: object): { type: string; [key: string]: unknown }[] {
  return (result as { content?: { type: string }[] }).content ?? [];
}

function textOf(result: object): string {
  return contentOf(result)
    .map((block) => (block.type === 'text' ? String(block.text) : ''))
    .join('');
}

describe('real MCP servers on a fleet', () => {
  const fleet = new TestFleet();
  // Made in beforeAll, so that a run that filters these tests out leaves no directory behind.
  let mcp: McpTestDir;
  let hello: string;
  let secret: string;
  const openClients: Client[] = [];
  const fleetClients: FleetClient[] = [];
  let dispatcher: FleetProcess & { url: string };
  let token: string;
  let client: FleetClient;
  let readyzUrl: string;
  /** The everything server run directly over stdio, outside the fleet: what its results look like at the source. */
  let direct: Client;
  let tcp: Server;
  let tcpPort = 0;
  let tcpConnections = 0;

  const grants = ['everything.*', 'memory.*', 'py.*', 'pyretry.*', 'pydyn.*', 'modern.*'];

  async function connect(bearer = token): Promise<Client> {
    const mcpClient = new Client({ name: 'forge-fleet-mcp-servers-tests', version: '0.0.0' });
    await mcpClient.connect(new StreamableHTTPClientTransport(new URL(`${dispatcher.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${bearer}` } } }));
    openClients.push(mcpClient);
    return mcpClient;
  }

  async function clientFor(subject: string): Promise<FleetClient> {
    const c = new FleetClient({ url: dispatcher.url, token: await fleet.token({ subject, grants }), timeoutMs: CALL_TIMEOUT_MS });
    fleetClients.push(c);
    return c;
  }

  /** `POST /v1/calls?wait=…` as any HTTP client sends it. */
  async function httpCall(name: string, args: Record<string, unknown>): Promise<CallView> {
    const res = await fetch(`${dispatcher.url}/v1/calls?wait=${CALL_TIMEOUT_MS}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name, arguments: args }),
    });
    const body: unknown = await res.json();
    expect(res.ok, JSON.stringify(body)).toBe(true);
    return CallView.parse(body);
  }

  /** The one live process of a host-tier Python server, found in /proc by its `--runs` file. */
  function pythonProcess(runs: string): number {
    const found = mcp.processes().filter((p) => p.cmdline.includes(mcp.path(runs)));
    expect(found, `processes naming ${mcp.path(runs)}`).toHaveLength(1);
    return found[0]!.pid;
  }

  const started = (runs: string, key: string) => until(`${runs} to record the start of ${key}`, () => mcp.runs(runs).find((r) => r.key === key && r.event === 'start'));

  beforeAll(async () => {
    mcp = new McpTestDir('mcp-servers');
    const root = mcp.mkdir('files');
    const out = mcp.mkdir('files', 'out');
    hello = mcp.path('files', 'hello.txt');
    secret = mcp.path('secret.txt');
    writeFileSync(hello, 'hello from inside the root\n');
    writeFileSync(secret, 'not for the filesystem server\n');
    tcp = createServer((socket) => {
      tcpConnections += 1;
      socket.end();
    });
    await new Promise<void>((resolve) => tcp.listen(0, '127.0.0.1', resolve));
    const address = tcp.address();
    tcpPort = typeof address === 'object' && address !== null ? address.port : 0;

    const servers = mcp.write({
      files: mcp.filesystem(root, [out], { tools: { write_file: { requiresConfirmation: false } } }),
      pybox: mcp.python(undefined, { tier: 'platform', filesystem: { read: [mcp.pythonDir] } }),
      everything: mcp.everything({ instances: { min: 1, max: 2 } }),
      memory: mcp.memory({ session: 'perCaller', instances: { min: 0, max: 4 } }),
      py: mcp.python('py.runs'),
      pyretry: mcp.python('pyretry.runs', { tools: { wait: { retryable: true } } }),
      pydyn: mcp.python('pydyn.runs'),
      modern: { command: process.execPath, args: [MODERN_SERVER, 'stdio', 'reject'] },
      missing: { command: '/nonexistent/forge-no-such-mcp-server', restartBackoff: { initialMs: 50, maxMs: 200 } },
    });
    const metricsPort = await freePort();
    readyzUrl = `http://127.0.0.1:${metricsPort}/readyz`;
    await Promise.all([
      fleet.worker({ tier: 'platform', tools: false, mcp: servers, env: { FORGE_SANDBOX: 'on' } }),
      fleet.worker({ tier: 'host', tools: false, mcp: servers, env: { FORGE_METRICS_PORT: String(metricsPort) } }),
    ]);
    dispatcher = await fleet.dispatcher({ FORGE_DEV_MODE: '0' });
    token = await fleet.token({ subject: 'mcp-servers-tests', grants });
    client = await clientFor('mcp-servers-tests');
    direct = new Client({ name: 'direct', version: '0.0.0' });
    await direct.connect(new StdioClientTransport({ command: process.execPath, args: [ENTRIES.everything, 'stdio'], stderr: 'ignore' }));
  });

  afterAll(async () => {
    await Promise.all(openClients.map((c) => c.close()));
    await Promise.all(fleetClients.map((c) => c.close()));
    await direct?.close();
    await new Promise((resolve) => tcp?.close(resolve));
    await fleet.stopAll();
    mcp?.remove();
  });

  describe('the catalog follows the servers', () => {
    it("lists each server's tools as prefix.tool in GET /v1/tools, with the input schemas the servers gave", async () => {
      const tools = byName(await client.tools());
      for (const name of ['files.read_text_file', 'files.write_file', 'everything.echo', 'everything.get-tiny-image', 'memory.create_entities', 'memory.read_graph', 'py.greet', 'pybox.connect']) {
        expect(tools.has(name), `${name} in GET /v1/tools`).toBe(true);
      }
      expect(tools.get('files.read_text_file')).toMatchObject({ tier: 'platform', parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] } });
      expect(tools.get('py.greet')).toMatchObject({ tier: 'host', title: 'Greet', parameters: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] } });
      expect(tools.get('everything.echo')?.parameters).toMatchObject({ type: 'object', properties: { message: { type: 'string' } } });
      // The server's annotations travel as hints.
      expect(tools.get('files.write_file')?.annotations).toMatchObject({ destructiveHint: true });
    });

    it("offers the same tools, schemas included, on the fleet's /mcp", async () => {
      const listed = byName(await listAll(await connect()));
      const fromHttp = (await client.tools()).map((t) => t.name).filter((n) => n.includes('.'));
      for (const name of fromHttp) expect(listed.has(name), `${name} in /mcp tools/list`).toBe(true);
      expect(listed.get('files.read_text_file')?.inputSchema).toMatchObject({ type: 'object', properties: { path: { type: 'string' } }, required: ['path'] });
      expect(listed.get('py.count_to')?.inputSchema).toMatchObject({ type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] });
    });

    it('takes in a tool the server adds while it runs (notifications/tools/list_changed)', async () => {
      expect((await client.tools()).some((t) => t.name === 'pydyn.late_tool')).toBe(false);
      expect(await client.call('pydyn.add_tool', { name: 'late_tool' })).toMatchObject({ isError: false, content: 'added late_tool' });
      await until('pydyn.late_tool in GET /v1/tools', async () => (await client.tools()).some((t) => t.name === 'pydyn.late_tool'));
      expect(await client.call('pydyn.late_tool', { a: 1 })).toMatchObject({ isError: false, content: '{"a": 1}' });
      expect((await listAll(await connect())).some((t) => t.name === 'pydyn.late_tool')).toBe(true);
    });

    it('leaves out the tools of a server that fails to start; the worker serves on and /readyz names it', async () => {
      expect((await client.tools()).filter((t) => t.name.startsWith('missing.'))).toEqual([]);
      const readyz = await until('the host worker /readyz to name the missing server as down', async () => {
        const body = (await (await fetch(readyzUrl)).json()) as { servers?: { name: string; state: string; error?: string }[] };
        const missing = body.servers?.find((s) => s.name === 'missing');
        return missing !== undefined && missing.state !== 'starting' ? body : undefined;
      });
      expect(readyz.servers?.find((s) => s.name === 'missing')?.state).not.toBe('up');
      expect(readyz.servers?.find((s) => s.name === 'py')?.state).toBe('up');
      expect(await client.call('py.greet', { name: 'still serving' })).toMatchObject({ isError: false });
    });
  });

  describe('server-filesystem in the Platform sandbox', () => {
    it('reads a file inside its root through HTTP, FleetClient and /mcp', async () => {
      const viaHttp = await httpCall('files.read_text_file', { path: hello });
      expect(viaHttp).toMatchObject({ status: 'completed', result: { isError: false } });
      expect(viaHttp.result?.content).toContain('hello from inside the root');
      const viaClient = await client.call('files.read_text_file', { path: hello });
      expect(viaClient).toMatchObject({ name: 'files.read_text_file', isError: false });
      expect(viaClient.content).toContain('hello from inside the root');
      const viaMcp = await (await connect()).callTool({ name: 'files.read_text_file', arguments: { path: hello } });
      expect(viaMcp.isError).toBe(false);
      expect(textOf(viaMcp)).toContain('hello from inside the root');
    });

    it('fails a read outside its root with a tool error', async () => {
      const result = await client.call('files.read_text_file', { path: secret });
      expect(result.isError).toBe(true);
      expect(result.content).not.toContain('not for the filesystem server');
      expect(result.content).toMatch(/denied|outside|allowed/i);
    });

    it('writes where the file declares `write`, and nowhere else of its root (the sandbox mounts the rest read-only)', async () => {
      const inside = mcp.path('files', 'out', `ok-${randomUUID()}.txt`);
      expect(await client.call('files.write_file', { path: inside, content: 'written by the server' })).toMatchObject({ isError: false });
      expect(readFileSync(inside, 'utf8')).toBe('written by the server');
      // Inside the server's root, so the server itself allows it: only the sandbox's read-only view refuses.
      const readOnly = mcp.path('files', `refused-${randomUUID()}.txt`);
      const refused = await client.call('files.write_file', { path: readOnly, content: 'must not land' });
      expect(refused.isError).toBe(true);
      expect(existsSync(readOnly)).toBe(false);
    });

    it('holds a destructiveHint tool for a person, unless the file says it needs none', async () => {
      const tools = byName(await client.tools());
      expect(tools.get('files.move_file')).toMatchObject({ requiresConfirmation: true, annotations: { destructiveHint: true } });
      expect(tools.get('files.write_file')).toMatchObject({ requiresConfirmation: false, annotations: { destructiveHint: true } });
      // readOnlyHint never loosens anything; it is simply not a reason to ask.
      expect(tools.get('files.read_text_file')).toMatchObject({ requiresConfirmation: false });
      const source = mcp.path('files', 'out', `move-${randomUUID()}.txt`);
      writeFileSync(source, 'stay');
      const view = await client.submit('files.move_file', { source, destination: `${source}.moved` }, { waitMs: 1000 });
      expect(view.status).toBe('awaiting_approval');
      expect(existsSync(source)).toBe(true);
      expect(existsSync(`${source}.moved`)).toBe(false);
    });
  });

  describe('server-memory, a session per caller', () => {
    const entities = (result: ToolResult): string[] => ((result.structuredContent?.entities ?? []) as { name: string }[]).map((e) => e.name).sort();

    it('keeps each caller to its own knowledge graph, across calls', async () => {
      const [alice, bob] = await Promise.all([clientFor('alice'), clientFor('bob')]);
      const note = (name: string) => ({ entities: [{ name, entityType: 'note', observations: [`written by ${name}`] }] });
      expect(await alice.call('memory.create_entities', note('alice-note'))).toMatchObject({ isError: false });
      expect(await bob.call('memory.create_entities', note('bob-note'))).toMatchObject({ isError: false });
      expect(entities(await alice.call('memory.read_graph'))).toEqual(['alice-note']);
      expect(entities(await bob.call('memory.read_graph'))).toEqual(['bob-note']);
      // The same caller, later calls: its session is still there.
      expect(await alice.call('memory.create_entities', note('alice-second'))).toMatchObject({ isError: false });
      expect(entities(await alice.call('memory.read_graph'))).toEqual(['alice-note', 'alice-second']);
      expect(entities(await bob.call('memory.read_graph'))).toEqual(['bob-note']);
    });
  });

  describe('server-everything', () => {
    it('echoes through HTTP, FleetClient and /mcp', async () => {
      expect((await httpCall('everything.echo', { message: 'over http' })).result).toMatchObject({ isError: false, content: 'Echo: over http' });
      expect(await client.call('everything.echo', { message: 'over the client' })).toMatchObject({ isError: false, content: 'Echo: over the client' });
      expect(textOf(await (await connect()).callTool({ name: 'everything.echo', arguments: { message: 'over mcp' } }))).toBe('Echo: over mcp');
    });

    it('passes its progress to FleetClient and to an /mcp client that sent a progressToken', async () => {
      const id = `progress-${randomUUID()}`;
      await client.submit('everything.trigger-long-running-operation', { duration: 2, steps: 4 }, { id });
      const view = await progressed(client, id, 1);
      expect(view.progress).toMatchObject({ total: 4 });
      expect((await client.wait(id)).isError).toBe(false);

      const seen: Progress[] = [];
      const result = await (await connect()).callTool({ name: 'everything.trigger-long-running-operation', arguments: { duration: 1, steps: 2 } }, undefined, { onprogress: (p) => seen.push(p) });
      expect(result.isError).toBe(false);
      expect(textOf(result)).toContain('Long running operation completed');
      expect(seen.filter((p) => !STATUS_NOTICES.has(p.message ?? '')).length).toBeGreaterThanOrEqual(1);
    });

    it('runs its task-only tool (simulate-research-query) on HTTP, FleetClient and /mcp, its stages as progress', async () => {
      // The server adds it right after initialize (a list change the worker follows).
      await until('everything.simulate-research-query in GET /v1/tools', async () => (await client.tools()).some((t) => t.name === 'everything.simulate-research-query'));
      const id = `research-${randomUUID()}`;
      // The three entrances at once: each call takes the server's four one-second stages.
      const seen: Progress[] = [];
      const overHttp = httpCall('everything.simulate-research-query', { topic: 'over http' });
      const overMcp = (async () => (await connect()).callTool({ name: 'everything.simulate-research-query', arguments: { topic: 'over mcp' } }, undefined, { onprogress: (p) => seen.push(p) }))();
      await client.submit('everything.simulate-research-query', { topic: 'over the client' }, { id });
      const view = await progressed(client, id, 1);
      expect(view.progress?.message).toMatch(/\.\.\.$/);
      const result = await client.wait(id);
      expect(result).toMatchObject({ isError: false });
      expect(result.content).toContain('# Research Report: over the client');
      expect((await overHttp).result).toMatchObject({ isError: false });
      expect((await overHttp).result?.content).toContain('# Research Report: over http');
      const answered = await overMcp;
      expect(answered.isError).toBe(false);
      expect(textOf(answered)).toContain('# Research Report: over mcp');
      // Beside the fleet's own status notices, at least one of the server's stages.
      expect(seen.some((p) => p.message !== undefined && !STATUS_NOTICES.has(p.message) && p.message.endsWith('...'))).toBe(true);
    });

    it('ends a long-running call cancelled on HTTP as CANCELLED', async () => {
      const id = `cancel-http-${randomUUID()}`;
      await client.submit('everything.trigger-long-running-operation', { duration: 60, steps: 60 }, { id });
      await progressed(client, id, 1);
      const cancelled = await client.cancel(id);
      expect(cancelled.status).toBe('cancelled');
      expect((await client.get(id, { waitMs: 5000 })).result?.error?.code).toBe('CANCELLED');
    });

    it('returns its image block byte for byte, as the server gives it', async () => {
      const source = await direct.callTool({ name: 'get-tiny-image', arguments: {} });
      const result = await client.call('everything.get-tiny-image');
      expect(result.isError).toBe(false);
      expect(result.blocks).toEqual(contentOf(source));
      const image = result.blocks?.find((b) => b.type === 'image');
      const expected = contentOf(source).find((b) => b.type === 'image');
      expect(image).toMatchObject({ mimeType: 'image/png' });
      expect(Buffer.from(String((image as { data?: string } | undefined)?.data), 'base64').equals(Buffer.from(String(expected?.data), 'base64'))).toBe(true);
      // The HTTP answer and /mcp carry the same blocks.
      expect((await httpCall('everything.get-tiny-image', {})).result?.blocks).toEqual(contentOf(source));
      expect(contentOf(await (await connect()).callTool({ name: 'everything.get-tiny-image', arguments: {} }))).toEqual(contentOf(source));
    });

    it('returns an embedded resource block as the server gives it', async () => {
      // The server stamps each resource with the time of day it made it (to the second): that part is blanked out.
      const untimed = (blocks: readonly object[] | undefined): unknown[] =>
        (blocks ?? []).map((block) => {
          const b = block as { type: string; resource?: { text?: string; blob?: string } };
          if (b.type !== 'resource' || b.resource === undefined) return block;
          const stamp = (text: string): string => text.replace(/created at .*$/, 'created at <time>');
          const { text, blob } = b.resource;
          return { ...b, resource: { ...b.resource, ...(text === undefined ? {} : { text: stamp(text) }), ...(blob === undefined ? {} : { blob: stamp(Buffer.from(blob, 'base64').toString('utf8')) }) } };
        });
      for (const resourceType of ['Text', 'Blob']) {
        const source = contentOf(await direct.callTool({ name: 'get-resource-reference', arguments: { resourceType, resourceId: 3 } }));
        expect(source.find((b) => b.type === 'resource')).toMatchObject({ resource: { uri: expect.stringContaining('3') as string, mimeType: 'text/plain' } });
        const result = await client.call('everything.get-resource-reference', { resourceType, resourceId: 3 });
        expect(result.isError).toBe(false);
        expect(untimed(result.blocks)).toEqual(untimed(source));
        const viaMcp = contentOf(await (await connect()).callTool({ name: 'everything.get-resource-reference', arguments: { resourceType, resourceId: 3 } }));
        expect(untimed(viaMcp)).toEqual(untimed(source));
      }
    });
  });

  describe('a server that speaks only MCP 2026-07-28', () => {
    it('serves its tools on every entrance: the worker bridges the revision', async () => {
      expect(await client.call('modern.add', { a: 2, b: 3 })).toMatchObject({ isError: false, content: '5', structuredContent: { sum: 5 } });
      expect((await httpCall('modern.add', { a: 4, b: 5 })).result).toMatchObject({ isError: false, structuredContent: { sum: 9 } });
      const viaMcp = await connect();
      expect(byName(await listAll(viaMcp)).get('modern.add')?.outputSchema).toMatchObject({ properties: { sum: { type: 'number' } } });
      expect(await viaMcp.callTool({ name: 'modern.add', arguments: { a: 1, b: 1 } })).toMatchObject({ structuredContent: { sum: 2 } });
    });
  });

  describe('a Python server (stdlib only)', () => {
    it('runs its tools: the process behind them is Debian python3', async () => {
      const greeted = await client.call('py.greet', { name: 'Ada' });
      expect(greeted).toMatchObject({ isError: false, content: expect.stringMatching(/^Hello, Ada, from Python 3\.\d+$/) as string, structuredContent: { language: 'python' } });
      const pid = Number(greeted.structuredContent?.pid);
      expect(readlinkSync(`/proc/${pid}/exe`)).toMatch(/^\/usr\/bin\/python3/);
      expect((await httpCall('py.greet', { name: 'Grace' })).result).toMatchObject({ isError: false, structuredContent: { greeting: expect.stringContaining('Grace') as string } });
      expect(textOf(await (await connect()).callTool({ name: 'py.greet', arguments: { name: 'Linus' } }))).toMatch(/^Hello, Linus, from Python/);
    });

    it('returns its image block byte for byte', async () => {
      const result = await client.call('py.image');
      expect(result).toMatchObject({ isError: false, content: 'a 4x4 PNG' });
      expect(result.blocks).toEqual([
        { type: 'text', text: 'a 4x4 PNG' },
        { type: 'image', data: PYTHON_IMAGE_PNG, mimeType: 'image/png' },
      ]);
      const viaMcp = contentOf(await (await connect()).callTool({ name: 'py.image', arguments: {} }));
      expect(viaMcp.find((b) => b.type === 'image')).toEqual({ type: 'image', data: PYTHON_IMAGE_PNG, mimeType: 'image/png' });
    });

    it('passes each progress step to an /mcp client, in order', async () => {
      const gate = mcp.path(`gate-${randomUUID()}`);
      const steps: Progress[] = [];
      const onprogress = (p: Progress): void => {
        const step = /^step (\d+)$/.exec(p.message ?? '');
        if (step === null) return;
        steps.push(p);
        // The server goes on to step k+1 only once the client has seen step k.
        writeFileSync(`${gate}.${step[1]}`, '');
      };
      const result = await (await connect()).callTool({ name: 'py.count_to', arguments: { n: 3, gate } }, undefined, { onprogress });
      expect(result.isError).toBe(false);
      expect(textOf(result)).toBe('counted to 3');
      // The last step may be overtaken by the result; each step before it was seen before the next was made.
      expect(steps.map((p) => p.message).slice(0, 2)).toEqual(['step 1', 'step 2']);
      const values = steps.map((p) => p.progress);
      expect(values).toEqual([...values].sort((a, b) => a - b));
    });

    it("passes its progress to FleetClient's view of the call", async () => {
      const gate = mcp.path(`gate-${randomUUID()}`);
      const id = `py-progress-${randomUUID()}`;
      await client.submit('py.count_to', { n: 3, gate }, { id });
      const first = await progressed(client, id, 1);
      expect(first.status).toBe('running');
      expect(first.progress).toMatchObject({ progress: 1, total: 3, message: 'step 1' });
      writeFileSync(`${gate}.1`, '');
      expect((await progressed(client, id, 2)).progress).toMatchObject({ progress: 2, total: 3, message: 'step 2' });
      writeFileSync(`${gate}.2`, '');
      expect(await client.wait(id)).toMatchObject({ isError: false, content: 'counted to 3' });
    });

    it('sends the server notifications/cancelled when an /mcp client cancels, and the call ends CANCELLED', async () => {
      const id = `py-cancel-${randomUUID()}`;
      const key = `cancel-${id}`;
      const controller = new AbortController();
      const call = (await connect())
        .callTool({ name: 'py.wait', arguments: { ms: 60_000, key }, _meta: { [CALL_ID]: id } }, undefined, { signal: controller.signal })
        .then(
          () => 'answered',
          () => 'rejected',
        );
      await started('py.runs', key);
      controller.abort('the agent moved on');
      expect(await call).toBe('rejected');
      const view = await client.get(id, { waitMs: 10_000 });
      expect(view.status).toBe('cancelled');
      expect(view.result?.error?.code).toBe('CANCELLED');
      await until('the Python server to see the cancel', () => mcp.runs('py.runs').some((r) => r.key === key && r.event === 'cancelled'));
    });

    it('cannot reach the network from the Platform sandbox (the same tool on the host tier can)', async () => {
      const boxed = await client.call('pybox.connect', { host: '127.0.0.1', port: tcpPort });
      expect(boxed.isError).toBe(true);
      expect(boxed.content).toMatch(/cannot connect/);
      expect(tcpConnections).toBe(0);
      expect(await client.call('py.connect', { host: '127.0.0.1', port: tcpPort })).toMatchObject({ isError: false, content: 'connected' });
      await until('the host-tier connection to be accepted', () => tcpConnections === 1);
    });
  });

  describe('an instance killed mid-call (kill -9)', () => {
    it('ends a call of a tool not marked retryable with MCP_SERVER_LOST', async () => {
      const id = `lost-${randomUUID()}`;
      const key = `lost-${id}`;
      await client.submit('py.wait', { ms: 60_000, key }, { id });
      const run = await started('py.runs', key);
      const pid = pythonProcess('py.runs');
      expect(pid).toBe(run.pid);
      process.kill(pid, 'SIGKILL');
      const result = await client.wait(id);
      expect(result).toMatchObject({ isError: true, error: { code: 'MCP_SERVER_LOST' } });
      expect(mcp.runs('py.runs').filter((r) => r.key === key && r.event === 'start')).toHaveLength(1);
      // The pool replaced the instance: the server serves again.
      expect(await client.call('py.greet', { name: 'after the loss' })).toMatchObject({ isError: false });
    });

    it('runs a call of a tool the file marks retryable again, and it completes', async () => {
      const id = `rerun-${randomUUID()}`;
      const key = `rerun-${id}`;
      await client.submit('pyretry.wait', { ms: 1500, key }, { id });
      const first = await started('pyretry.runs', key);
      const pid = pythonProcess('pyretry.runs');
      expect(pid).toBe(first.pid);
      process.kill(pid, 'SIGKILL');
      expect(await client.wait(id)).toMatchObject({ isError: false, content: 'waited 1500 ms' });
      const runs = mcp.runs('pyretry.runs').filter((r) => r.key === key);
      const starts = runs.filter((r) => r.event === 'start');
      expect(starts).toHaveLength(2);
      expect(starts[0]?.pid).toBe(pid);
      // The second run was on the instance that replaced the killed one.
      expect(starts[1]?.pid).not.toBe(pid);
      expect(runs.filter((r) => r.event === 'end')).toHaveLength(1);
    });
  });
});

describe('no MCP server process outlives its worker', () => {
  const fleet = new TestFleet();
  const dirs: McpTestDir[] = [];

  afterAll(async () => {
    await fleet.stopAll();
    for (const dir of dirs) dir.remove();
  });

  /** A worker of its own servers (two instances each, so there is more than one process to leak). */
  async function workerWithServers(tier: 'host' | 'platform'): Promise<{ worker: FleetProcess; dir: McpTestDir; pids: ReadonlySet<number> }> {
    const dir = new McpTestDir(`mcp-leaks-${tier}`);
    dirs.push(dir);
    const two = { instances: { min: 2, max: 2 } };
    const servers =
      tier === 'host'
        ? { everything: dir.everything(two), memory: dir.memory(two), py: dir.python('py.runs', two) }
        : { files: dir.filesystem(dir.mkdir('files'), [], two), pybox: dir.python(undefined, { ...two, tier: 'platform', filesystem: { read: [dir.pythonDir] } }) };
    const port = await freePort();
    const worker = await fleet.worker({ tier, tools: false, mcp: dir.write(servers), env: { FORGE_METRICS_PORT: String(port), ...(tier === 'platform' ? { FORGE_SANDBOX: 'on' } : {}) } });
    // Its /readyz answers once start-up is over (signal handlers included) and says when every server is up.
    await until(`the ${tier} worker's servers to be up`, async () => {
      const body = (await (await fetch(`http://127.0.0.1:${port}/readyz`)).json()) as { servers?: { state: string; instances: number }[] };
      return body.servers?.length === Object.keys(servers).length && body.servers.every((s) => s.state === 'up' && s.instances === 2);
    });
    // Each server's own process names the directory (a sandbox's wrappers may too).
    const pids = new Set(dir.processes().map((p) => p.pid));
    expect(pids.size).toBeGreaterThanOrEqual(Object.keys(servers).length * 2);
    return { worker, dir, pids };
  }

  /**
   * Waits until no process names the directory, and none of `pids` (the servers seen running) is left as
   * a zombie — a zombie's command line is gone, so the scan by name alone would miss one.
   */
  const gone = (dir: McpTestDir, pids: ReadonlySet<number>, what: string) =>
    until(`no process of ${dir.home} left ${what}`, () => dir.processes().length === 0 && allProcesses().every((p) => !(pids.has(p.pid) && p.state === 'Z')), { timeoutMs: 15_000 });

  it('kills them with a worker killed with SIGKILL', async () => {
    const { worker, dir, pids } = await workerWithServers('host');
    await worker.stop('SIGKILL');
    await gone(dir, pids, 'after kill -9 of the worker');
  }, 60_000);

  /** Calls `tool` of the worker's servers through a dispatcher of this fleet, as an agent would. */
  async function callThroughFleet(tool: string, args: Record<string, unknown>): Promise<ToolResult> {
    const dispatcher = await fleet.dispatcher();
    const client = new FleetClient({ url: dispatcher.url, token: await fleet.token({ subject: 'leaks', grants: ['py.*', 'pybox.*'] }), timeoutMs: CALL_TIMEOUT_MS });
    try {
      return await client.call(tool, args);
    } finally {
      await client.close();
    }
  }

  /**
   * The pid of a helper process a Python server started (spawn_helper), seen running: found in /proc by its
   * command line, since in a sandbox's PID namespace the pid the server reports is not this machine's.
   */
  async function helperOf(dir: McpTestDir, tool: string, args: Record<string, unknown>): Promise<number> {
    const helpers = () => dir.processes().filter((p) => p.cmdline.endsWith(' helper'));
    const before = new Set(helpers().map((p) => p.pid));
    const result = await callThroughFleet(tool, args);
    expect(result, JSON.stringify(result)).toMatchObject({ isError: false });
    const started = helpers().filter((p) => !before.has(p.pid));
    expect(started).toHaveLength(1);
    return started[0]!.pid;
  }

  it('kills what a host server started, with a worker killed with SIGKILL', async () => {
    const { worker, dir, pids } = await workerWithServers('host');
    // A helper that never reads the server's stdin (a browser, a language server) does not notice the worker is gone.
    const helper = await helperOf(dir, 'py.spawn_helper', {});
    await worker.stop('SIGKILL');
    await gone(dir, new Set([...pids, helper]), 'after kill -9 of the worker');
  }, 60_000);

  it('kills what a sandboxed server started, even in a session of its own, with a worker killed with SIGKILL', async () => {
    const { worker, dir, pids } = await workerWithServers('platform');
    const helpers = [await helperOf(dir, 'pybox.spawn_helper', {}), await helperOf(dir, 'pybox.spawn_helper', { own_session: true })];
    await worker.stop('SIGKILL');
    await gone(dir, new Set([...pids, ...helpers]), 'after kill -9 of the worker');
  }, 60_000);

  it('stops them when the worker stops (SIGTERM)', async () => {
    const { worker, dir, pids } = await workerWithServers('host');
    const code = await worker.stop('SIGTERM');
    expect(code, worker.output().slice(-3000)).toBe(0);
    await gone(dir, pids, 'after the worker stopped');
  }, 60_000);

  it('stops what a host server started as a daemon (forked twice, in a session of its own) when the worker stops', async () => {
    const { worker, dir, pids } = await workerWithServers('host');
    const daemon = await helperOf(dir, 'py.spawn_helper', { daemon: true });
    const code = await worker.stop('SIGTERM');
    expect(code, worker.output().slice(-3000)).toBe(0);
    await gone(dir, new Set([...pids, daemon]), 'after the worker stopped');
  }, 60_000);

  it('kills sandboxed ones too, after fleet.stopAll()', async () => {
    const { dir, pids } = await workerWithServers('platform');
    await fleet.stopAll();
    await gone(dir, pids, 'after fleet.stopAll()');
  }, 60_000);
});
