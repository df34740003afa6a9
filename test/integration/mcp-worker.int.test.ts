import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FleetClient } from '@forge-fleet/client';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { freePort } from '@forge-fleet/local-redis';
import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { ROOT } from '../fixtures/fleet.js';
import { fleetPerTest } from '../fixtures/fleet-per-test.js';
import { until } from '../fixtures/wait.js';

const EVERYTHING = createRequire(import.meta.url).resolve('@modelcontextprotocol/server-everything/dist/index.js');
const CHANGING = join(ROOT, 'test', 'fixtures', 'changing-mcp-server.mjs');
const HOSTILE = join(ROOT, 'test', 'fixtures', 'hostile-mcp-server.mjs');
const UPSTREAM = join(ROOT, 'apps', 'worker', 'test', 'fixtures', 'mcp-http-upstream.mjs');
const V2_SERVER = join(ROOT, 'apps', 'worker', 'test', 'fixtures', 'mcp-v2-server.mjs');
const ODD_SERVER = join(ROOT, 'apps', 'worker', 'test', 'fixtures', 'odd-mcp-server.mjs');

/** A fixture that prints its `"port":N` on stdout once it listens, started with `args`; `stderr` as for spawn. */
async function startListening(args: string[], stderr: 'inherit' | 'ignore'): Promise<{ url: string; stop: () => void }> {
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', stderr] });
  let out = '';
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /"port":(\d+)/.exec(out);
      if (m !== null) resolve(Number(m[1]));
    });
    child.once('exit', (code) => reject(new Error(`the upstream exited (${code})`)));
  });
  return { url: `http://127.0.0.1:${port}/mcp`, stop: () => child.kill('SIGKILL') };
}

/** The HTTP upstream fixture (official SDK, Streamable HTTP, asks for `Authorization: Bearer <token>`), on a free port. */
/** The pid of a process of this user whose command line contains `text`, or undefined. */
function pidOf(text: string): number | undefined {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0').join(' ').includes(text)) return Number(entry);
    } catch {
      // Gone meanwhile.
    }
  }
  return undefined;
}

/** Whether `pid` is a live process (a zombie is not). */
function isAlive(pid: number): boolean {
  try {
    return !/^\S+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

const startUpstream = (token: string, onPort = 0) => startListening([UPSTREAM, token, String(onPort)], 'inherit');

/** A v2-SDK server over Streamable HTTP that speaks only MCP 2026-07-28 (`legacy: 'reject'`), on a free port. */
const startModernUpstream = () => startListening([V2_SERVER, 'http', 'reject'], 'ignore');

/** Writes a servers file to a temp dir and returns its path. */
function serversFile(servers: Record<string, unknown>): string {
  const path = join(mkdtempSync(join(tmpdir(), 'forge-mcp-')), 'servers.yaml');
  writeFileSync(path, stringify({ version: 1, servers }));
  return path;
}

const everything = (extra: Record<string, unknown> = {}): Record<string, unknown> => ({ command: process.execPath, args: [EVERYTHING], env: { PATH: { fromEnv: 'PATH' } }, tier: 'host', ...extra });

interface ToolView {
  name: string;
  title?: string;
  requiresConfirmation?: boolean;
  retryable?: boolean;
  parameters?: { properties?: Record<string, unknown> };
}

async function listed(url: string): Promise<ToolView[]> {
  const body = (await (await fetch(`${url}/v1/tools`)).json()) as { tools: ToolView[] };
  return body.tools;
}

/**
 * The worker side of issue #16 end to end: `forge-worker --mcp` runs the
 * file's servers, their tools/list becomes the catalog, and calls go through
 * the whole pipeline to `tools/call` on a warm instance.
 */
describe('forge-worker --mcp', () => {
  const t = fleetPerTest();

  it("serves a real server's tools under its prefix, with their schemas and the file's settings, and runs them", async () => {
    const file = serversFile({ everything: everything({ instances: { min: 2, max: 2 }, tools: { echo: { retryable: true }, 'get-sum': { requiresConfirmation: true, approvalDeadlineMs: 123_456 } } }) });
    await t.fleet.worker({ tier: 'host', tools: false, mcp: file });
    const { url } = await t.fleet.dispatcher({ FORGE_APPROVAL: 'auto' });
    t.client = new FleetClient({ url });
    await until('everything.echo in the catalog', async () => (await listed(url)).some((tool) => tool.name === 'everything.echo'));
    const tools = await listed(url);
    const echo = tools.find((tool) => tool.name === 'everything.echo')!;
    expect(echo.retryable).toBe(true);
    expect(Object.keys(echo.parameters?.properties ?? {})).toContain('message');
    expect(tools.find((tool) => tool.name === 'everything.get-sum')?.requiresConfirmation).toBe(true);
    expect(tools.every((tool) => tool.name.startsWith('everything.'))).toBe(true);

    const results = await Promise.all(Array.from({ length: 200 }, (_, i) => t.client!.call('everything.echo', { message: `hi ${i}` }, { timeoutMs: 30_000 })));
    results.forEach((r, i) => expect(r).toMatchObject({ isError: false, content: `Echo: hi ${i}` }));
    // The schema the server listed is the one the dispatcher checks: a wrong argument never reaches the server.
    await expect(t.client.call('everything.echo', { message: 42 }, { timeoutMs: 30_000 })).rejects.toMatchObject({ code: 'SCHEMA_VALIDATION' });
    // requiresConfirmation from the file: the call waits for a person.
    const waiting = await fetch(`${url}/v1/calls`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name: 'everything.get-sum', arguments: { a: 1, b: 2 } }) });
    expect(((await waiting.json()) as { status: string }).status).toBe('awaiting_approval');
    // The file's approval deadline for the tool (the policy names none for it).
    const approver = await t.fleet.token({ subject: 'alice', role: 'approver' });
    const { approvals } = (await (await fetch(`${url}/v1/approvals`, { headers: { authorization: `Bearer ${approver}` } })).json()) as { approvals: { tool: string; deadline: number; createdAt: number }[] };
    const pending = approvals.find((a) => a.tool === 'everything.get-sum')!;
    expect(pending.deadline - pending.createdAt).toBe(123_456);
  });

  it('takes, by default, only the calls its servers can run at once (instances.max × callsPerInstance), so the rest wait in the queue for any worker', async () => {
    const file = serversFile({ everything: everything({ instances: { min: 1, max: 2 }, callsPerInstance: 3 }), other: everything({ prefix: 'ev2', callsPerInstance: 4 }) });
    const defaulted = await t.fleet.worker({ tier: 'host', tools: false, mcp: file, concurrency: 'default' });
    expect(defaulted.output()).toMatch(/"concurrency":10\b/);
    // Said on the command line, it stands.
    const told = await t.fleet.worker({ tier: 'host', tools: false, mcp: file, concurrency: 32 });
    expect(told.output()).toMatch(/"concurrency":32\b/);
  });

  it("serves a server's tools while another still waits for its first start, names that one 'starting' in /readyz, and stops without waiting it out", async () => {
    const port = await freePort();
    // `hung` never answers initialize, and its start-up timeout is ten minutes: before, the worker waited that long
    // before it served any server, answered no probe meanwhile, and a SIGTERM waited for that start too.
    const file = serversFile({ hostile: { command: process.execPath, args: [HOSTILE], env: {}, tier: 'host' }, hung: { command: process.execPath, args: ['-e', 'setInterval(() => {}, 1000)'], env: {}, tier: 'host', startupTimeoutMs: 600_000 } });
    const worker = await t.fleet.worker({ tier: 'host', tools: false, mcp: file, readyLine: 'worker pool ready', env: { FORGE_METRICS_PORT: String(port), FORGE_METRICS_HOST: '127.0.0.1' } });
    const { url } = await t.fleet.dispatcher({ FORGE_APPROVAL: 'auto' });
    t.client = new FleetClient({ url });
    await until('hostile.flat in the catalog', async () => (await listed(url)).some((tool) => tool.name === 'hostile.flat'));
    expect(await t.client.call('hostile.flat', {}, { timeoutMs: 30_000 })).toMatchObject({ isError: false, content: 'flat' });
    expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).toBe(200);
    const ready = await fetch(`http://127.0.0.1:${port}/readyz`);
    // Not ready while a server is on its first start; each server named with its state.
    expect(ready.status).toBe(503);
    const body = (await ready.json()) as { ok: boolean; servers: { name: string; state: string }[] };
    expect(body).toMatchObject({ ok: false });
    expect(body.servers.find((s) => s.name === 'hostile')).toMatchObject({ state: 'up' });
    expect(body.servers.find((s) => s.name === 'hung')).toMatchObject({ state: 'starting' });
    const hungPid = await until('the hung server to run', () => pidOf('setInterval(() => {}, 1000)'));
    // Well within the test's time, and the ten-minute start-up timeout: the start still waiting is given up.
    expect(await worker.stop('SIGTERM')).toBe(0);
    await until('the hung server to be gone', () => !isAlive(hungPid));
  }, 90_000);

  it('stops at once, announcing nothing, when stopped while its servers are on their first start', async () => {
    const file = serversFile({ hung: { command: process.execPath, args: ['-e', 'setInterval(() => {}, 1001)'], env: {}, tier: 'host', startupTimeoutMs: 600_000 } });
    const worker = await t.fleet.worker({ tier: 'host', tools: false, mcp: file, readyLine: 'MCP servers starting' });
    const hungPid = await until('the hung server to run', () => pidOf('setInterval(() => {}, 1001)'));
    // Before, the signal waited for the start's head start (3 s), and the worker announced its pool first.
    expect(await worker.stop('SIGTERM')).toBe(0);
    expect(worker.output()).not.toContain('worker pool ready');
    await until('the hung server to be gone', () => !isAlive(hungPid));
  }, 60_000);

  it("reaps its servers' reapers before it exits on SIGTERM: none is left to PID 1", async () => {
    const file = serversFile({ odd: { command: process.execPath, args: [ODD_SERVER], env: {}, tier: 'host' } });
    const worker = await t.fleet.worker({ tier: 'host', tools: false, mcp: file });
    const { url } = await t.fleet.dispatcher({ FORGE_APPROVAL: 'auto' });
    t.client = new FleetClient({ url });
    await until('odd.pid in the catalog', async () => (await listed(url)).some((tool) => tool.name === 'odd.pid'));
    const serverPid = Number((await t.client.call('odd.pid', {}, { timeoutMs: 30_000 })).content);
    const reaper = await until("the server's reaper", () => pidOf(`forge-mcp-reaper ${serverPid}`));
    expect(await worker.stop('SIGTERM')).toBe(0);
    // Read at once: a reaper the worker did not wait for is, at this moment, a zombie handed to PID 1.
    expect(existsSync(`/proc/${reaper}`)).toBe(false);
  }, 60_000);

  it('leaves out the tools of a server that cannot start, serves the others, and /readyz names the one that is down', async () => {
    const port = await freePort();
    const file = serversFile({
      everything: everything(),
      broken: { command: '/nonexistent/mcp-server', tier: 'host', startupTimeoutMs: 2000, restartBackoff: { initialMs: 60_000, maxMs: 60_000 } },
    });
    await t.fleet.worker({ tier: 'host', tools: false, mcp: file, env: { FORGE_METRICS_PORT: String(port), FORGE_METRICS_HOST: '127.0.0.1' } });
    const { url } = await t.fleet.dispatcher({ FORGE_APPROVAL: 'auto' });
    t.client = new FleetClient({ url });
    await until('everything.echo in the catalog', async () => (await listed(url)).some((tool) => tool.name === 'everything.echo'));
    expect((await listed(url)).some((tool) => tool.name.startsWith('broken.'))).toBe(false);
    expect(await t.client.call('everything.echo', { message: 'still here' }, { timeoutMs: 30_000 })).toMatchObject({ isError: false, content: 'Echo: still here' });
    const ready = await fetch(`http://127.0.0.1:${port}/readyz`);
    expect(ready.status).toBe(200);
    const body = (await ready.json()) as { ok: boolean; servers: { name: string; state: string; error?: string }[] };
    expect(body.servers.find((s) => s.name === 'everything')).toMatchObject({ state: 'up' });
    expect(body.servers.find((s) => s.name === 'broken')).toMatchObject({ state: 'down', error: expect.stringContaining('broken') as string });
  });

  it("follows the server's tool list: a tool it adds is served, and calls running meanwhile finish once", async () => {
    const file = serversFile({ changing: { command: process.execPath, args: [CHANGING], cwd: ROOT, env: { PATH: { fromEnv: 'PATH' } }, tier: 'host' } });
    await t.fleet.worker({ tier: 'host', tools: false, mcp: file });
    const { url } = await t.fleet.dispatcher({ FORGE_APPROVAL: 'auto' });
    t.client = new FleetClient({ url });
    await until('changing.grow in the catalog', async () => (await listed(url)).some((tool) => tool.name === 'changing.grow'));
    expect((await listed(url)).some((tool) => tool.name === 'changing.extra_1')).toBe(false);
    // Calls under way while the worker moves to its new set of tools.
    const slow = Array.from({ length: 20 }, (_, i) => t.client!.call('changing.slow', { ms: 1500 }, { id: `slow-${i}-${Date.now()}`, timeoutMs: 30_000 }));
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(await t.client.call('changing.grow', {}, { timeoutMs: 30_000 })).toMatchObject({ isError: false, content: 'added extra_1' });
    await until('changing.extra_1 in the catalog', async () => (await listed(url)).some((tool) => tool.name === 'changing.extra_1'), { timeoutMs: 20_000 });
    expect(await t.client.call('changing.extra_1', { x: 21 }, { timeoutMs: 30_000 })).toMatchObject({ isError: false, content: 'extra 1: 42' });
    // Its schema came with it: the dispatcher refuses what the server's schema refuses.
    await expect(t.client.call('changing.extra_1', { x: 'no' }, { timeoutMs: 30_000 })).rejects.toMatchObject({ code: 'SCHEMA_VALIDATION' });
    for (const r of await Promise.all(slow)) expect(r).toMatchObject({ isError: false, content: 'slept 1500' });
    // The tools that stayed kept working throughout.
    expect(await t.client.call('changing.slow', { ms: 1 }, { timeoutMs: 30_000 })).toMatchObject({ isError: false });
  }, 90_000);

  /** The `changing` server on a host worker (`extra` for its entry in the file, `worker` for the worker's options), a dispatcher, and its client. */
  async function changingFleet(extra: Record<string, unknown>, worker: { concurrency?: number } = {}): Promise<{ url: string; client: FleetClient }> {
    const file = serversFile({ changing: { command: process.execPath, args: [CHANGING], cwd: ROOT, env: { PATH: { fromEnv: 'PATH' } }, tier: 'host', ...extra } });
    await t.fleet.worker({ tier: 'host', tools: false, mcp: file, ...worker });
    const { url } = await t.fleet.dispatcher({ FORGE_APPROVAL: 'auto' });
    const client = new FleetClient({ url });
    t.client = client;
    await until('changing.shape in the catalog', async () => (await listed(url)).some((tool) => tool.name === 'changing.shape'));
    return { url, client };
  }

  const shapeTakesNumbers = async (url: string): Promise<boolean> =>
    (await listed(url)).some((tool) => tool.name === 'changing.shape' && JSON.stringify(tool.parameters?.properties?.a).includes('number'));

  it("refuses to approve a call whose arguments its tool's current schema refuses (the server changed it while the call waited); a modify that fits runs", async () => {
    const { url, client } = await changingFleet({ tools: { shape: { requiresConfirmation: true } } });
    const submitted = await client.submit('changing.shape', { a: 'x' });
    expect(submitted.status).toBe('awaiting_approval');
    expect(await client.call('changing.retype', {}, { timeoutMs: 30_000 })).toMatchObject({ isError: false });
    await until("changing.shape's new schema in the catalog", () => shapeTakesNumbers(url), { timeoutMs: 20_000 });
    const approver = await t.fleet.token({ subject: 'alice', role: 'approver' });
    const decide = (body: Record<string, unknown>) =>
      fetch(`${url}/v1/approvals/${submitted.id}`, { method: 'POST', headers: { authorization: `Bearer ${approver}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const approved = await decide({ decision: 'approve' });
    const refusal = (await approved.json()) as { error: { code: string; message: string; path: string; stage: string } };
    expect(approved.status, JSON.stringify(refusal)).toBe(422);
    expect(refusal.error).toMatchObject({ code: 'SCHEMA_VALIDATION', path: '/a', stage: 'definition_changed' });
    expect(refusal.error.message).toMatch(/changed/);
    // Refused, the call keeps waiting; a person can make the arguments fit, and then it runs.
    expect(((await (await fetch(`${url}/v1/calls/${submitted.id}`)).json()) as { status: string }).status).toBe('awaiting_approval');
    expect((await decide({ decision: 'modify', arguments: { a: 7 } })).status).toBe(202);
    expect(await client.wait(submitted.id, { timeoutMs: 30_000 })).toMatchObject({ isError: false, content: 'shape got 7 (number)' });
  }, 90_000);

  it('ends a queued call SCHEMA_VALIDATION when its tool changed to a schema that refuses its arguments before any worker took it', async () => {
    // One call at a time: `shape` waits in the queue behind a slow call while the server changes its schema.
    const { url, client } = await changingFleet({}, { concurrency: 1 });
    expect(await client.call('changing.retype', { ms: 1000 }, { timeoutMs: 30_000 })).toMatchObject({ isError: false });
    const slow = client.call('changing.slow', { ms: 4000 }, { timeoutMs: 30_000 });
    await new Promise((resolve) => setTimeout(resolve, 300));
    const queued = await client.submit('changing.shape', { a: 'x' });
    expect(queued.status).toBe('queued');
    await until("changing.shape's new schema in the catalog", () => shapeTakesNumbers(url), { timeoutMs: 20_000 });
    const ended = await client.wait(queued.id, { timeoutMs: 30_000 }).then(
      (result) => result.error,
      (error: unknown) => error as { code: string; details?: Record<string, unknown> },
    );
    expect(ended, JSON.stringify(ended)).toMatchObject({ code: 'SCHEMA_VALIDATION', details: { path: '/a', stage: 'definition_changed' } });
    expect(await slow).toMatchObject({ isError: false });
    expect(await client.call('changing.shape', { a: 3 }, { timeoutMs: 30_000 })).toMatchObject({ isError: false, content: 'shape got 3 (number)' });
  }, 90_000);

  it('follows a server whose tool list never rests in a few generations, not one per change, and serves the list it ends with', async () => {
    const file = serversFile({ changing: { command: process.execPath, args: [CHANGING], cwd: ROOT, env: { PATH: { fromEnv: 'PATH' } }, tier: 'host' } });
    const worker = await t.fleet.worker({ tier: 'host', tools: false, mcp: file });
    const { url } = await t.fleet.dispatcher({ FORGE_APPROVAL: 'auto' });
    t.client = new FleetClient({ url });
    await until('changing.churn in the catalog', async () => (await listed(url)).some((tool) => tool.name === 'changing.churn'));
    const generations = (): number => worker.output().split('\n').filter((line) => line.includes('tools changed: serving the new set')).length;
    const before = generations();
    // 1,500 list changes, a few milliseconds apart (10 s or more), while calls run.
    const calls = Array.from({ length: 20 }, (_, i) => t.client!.call('changing.slow', { ms: 200 + i * 50 }, { timeoutMs: 30_000 }));
    expect(await t.client.call('changing.churn', { count: 1500 }, { timeoutMs: 30_000 })).toMatchObject({ isError: false, content: 'churned 1500' });
    await until('changing.churn_1500 in the catalog', async () => (await listed(url)).some((tool) => tool.name === 'changing.churn_1500'), { timeoutMs: 20_000 });
    expect(await t.client.call('changing.churn_1500', {}, { timeoutMs: 30_000 })).toMatchObject({ isError: false, content: 'churn 1500' });
    for (const r of await Promise.all(calls)) expect(r).toMatchObject({ isError: false });
    // Each generation is a pool with its own queue and Redis connections. Taken as they came, these changes made
    // 72 generations here; at most one a second, about one per second of churn.
    expect(generations() - before).toBeLessThan(30);
  }, 90_000);

  /** A host worker serving the hostile fixture as `hostile`, and a dispatcher; resolves once the tools are listed. */
  async function hostileFleet(): Promise<{ url: string; client: FleetClient; worker: { output(): string } }> {
    const file = serversFile({ hostile: { command: process.execPath, args: [HOSTILE], env: {}, tier: 'host' } });
    const worker = await t.fleet.worker({ tier: 'host', tools: false, mcp: file });
    const { url } = await t.fleet.dispatcher({ FORGE_APPROVAL: 'auto' });
    const client = new FleetClient({ url });
    t.client = client;
    await until('hostile.flat in the catalog', async () => (await listed(url)).some((tool) => tool.name === 'hostile.flat'));
    return { url, client, worker };
  }

  it('ends an instance that closes its stdout and runs on: its call ends MCP_SERVER_LOST, not at its timeout, and a replacement serves', async () => {
    const { client, worker } = await hostileFleet();
    // The server's default timeout is 60 s: before, the call waited for it (EXECUTION_TIMEOUT, blaming the tool), and
    // the client's 30 s wait ran out first.
    const lost = await client.call('hostile.close_stdout', {}, { timeoutMs: 30_000 });
    expect(lost).toMatchObject({ isError: true, error: { code: 'MCP_SERVER_LOST', details: { toolName: 'hostile.close_stdout', server: 'hostile' } } });
    expect(await client.call('hostile.flat', {}, { timeoutMs: 30_000 })).toMatchObject({ isError: false, content: 'flat' });
    await until('the worker to log why the instance ended', () => worker.output().includes('closed its stdout while it ran'));
  }, 90_000);

  it("fails a call whose answer nests deeper than any hop could write it (RESOURCE_LIMIT), on every entrance, and serves on", async () => {
    const { url, client } = await hostileFleet();
    // 10,000 levels: JSON.parse takes it on the worker, JSON.stringify cannot write it. 3,000: the worker could write
    // it, a hop with less stack to spare (an answer, a client) perhaps not. Both end the same way.
    for (const [tool, depth] of [['hostile.deep', 10_000], ['hostile.deep_block', 10_000], ['hostile.deep', 3_000], ['hostile.deep_block', 3_000]] as const) {
      const res = await fetch(`${url}/v1/calls?wait=20000`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name: tool, arguments: { depth } }) });
      expect(res.status).toBe(200);
      const view = (await res.json()) as { status: string; result?: { content: string; error?: { code: string } } };
      expect(view).toMatchObject({ status: 'failed', result: { error: { code: 'RESOURCE_LIMIT' } } });
      expect(view.result?.content).toContain('nests deeper than 256 levels');
      await expect(client.call(tool, { depth }, { timeoutMs: 20_000 })).resolves.toMatchObject({ isError: true, error: { code: 'RESOURCE_LIMIT' } });
    }
    const mcp = new Client({ name: 'deep-test', version: '1' });
    await mcp.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`)));
    try {
      const answered = await mcp.callTool({ name: 'hostile.deep', arguments: {} });
      expect(answered.isError).toBe(true);
      expect(answered._meta?.['forge-fleet/error']).toMatchObject({ code: 'RESOURCE_LIMIT' });
      // Within the limit the same tool is served as it answers, and the instance serves on.
      const within = await mcp.callTool({ name: 'hostile.deep', arguments: { depth: 100 } });
      expect(within.isError).toBe(false);
      expect(JSON.stringify(within.structuredContent)).toBe(`${'{"a":'.repeat(100)}1${'}'.repeat(100)}`);
    } finally {
      await mcp.close();
    }
    expect(await client.call('hostile.flat', {}, { timeoutMs: 20_000 })).toMatchObject({ isError: false, content: 'flat' });
  }, 60_000);

  it("fails a call at once, EXECUTION_FAILED under the fleet's name of the tool, when the server answers it with any JSON-RPC error or with neither a result nor an error, or with a result that is not a tool's; keeps a 2024-10-07 server's toolResult; and serves on", async () => {
    const { url, client } = await hostileFleet();
    const mcp = new Client({ name: 'answers-test', version: '1' });
    await mcp.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`)));
    try {
      // -32000 and -32001 are the SDK's own codes for a closed connection and a timeout, but a server sends them too:
      // neither is an instance lost or a call timed out. The tool's timeout is 60 s; the client waits 20 at most.
      for (const code of [-32000, -32001, -32603, -32602, 1]) {
        const failed = await client.call('hostile.rpc_error', { code }, { timeoutMs: 20_000 });
        expect(failed).toMatchObject({ isError: true, error: { code: 'EXECUTION_FAILED', details: { toolName: 'hostile.rpc_error', server: 'hostile', mcpCode: code } } });
        expect(failed.content).toContain(`server error ${code}`);
        expect(failed.content).toContain("tool 'hostile.rpc_error'");
        const answered = await mcp.callTool({ name: 'hostile.rpc_error', arguments: { code } });
        expect(answered._meta?.['forge-fleet/error']).toMatchObject({ code: 'EXECUTION_FAILED', details: { mcpCode: code } });
      }
      // An answer that is neither (a result that is not an object, no result and no error, an error without a code)
      // was dropped by the SDK, and the call waited for its timeout.
      for (const shape of ['null', 'number', 'array', 'neither', 'bad_error']) {
        const failed = await client.call('hostile.bad_answer', { shape }, { timeoutMs: 20_000 });
        expect(failed).toMatchObject({ isError: true, error: { code: 'EXECUTION_FAILED', details: { toolName: 'hostile.bad_answer', server: 'hostile' } } });
        expect(failed.content).toContain('neither a result nor an error');
        const answered = await mcp.callTool({ name: 'hostile.bad_answer', arguments: { shape } });
        expect(answered._meta?.['forge-fleet/error']).toMatchObject({ code: 'EXECUTION_FAILED' });
      }
      // A result that is not a tool's: its text was dropped as no blocks, and an isError of 'yes' read as a success.
      for (const [shape, why] of [
        ['content_string', "its 'content' is a string, not an array of content blocks"],
        ['content_block', "its 'content' is an object, not an array of content blocks"],
        ['is_error_string', "its 'isError' is a string, not true or false"],
      ] as const) {
        const failed = await client.call('hostile.bad_answer', { shape }, { timeoutMs: 20_000 });
        expect(failed).toMatchObject({ isError: true, error: { code: 'EXECUTION_FAILED', details: { toolName: 'hostile.bad_answer' } } });
        expect(failed.content).toContain(why);
        const answered = await mcp.callTool({ name: 'hostile.bad_answer', arguments: { shape } });
        expect(answered).toMatchObject({ isError: true, _meta: { 'forge-fleet/error': { code: 'EXECUTION_FAILED', message: failed.error?.message } } });
      }
      // A 2024-10-07 server's toolResult is its result: an object as structured content, a string as text.
      expect(await client.call('hostile.bad_answer', { shape: 'tool_result' }, { timeoutMs: 20_000 })).toMatchObject({ isError: false, content: '{"answer":42}', structuredContent: { answer: 42 } });
      expect(await client.call('hostile.bad_answer', { shape: 'tool_result_text' }, { timeoutMs: 20_000 })).toMatchObject({ isError: false, content: 'the answer is 42' });
      expect(await mcp.callTool({ name: 'hostile.bad_answer', arguments: { shape: 'tool_result' } })).toMatchObject({ isError: false, content: [{ type: 'text', text: '{"answer":42}' }], structuredContent: { answer: 42 } });
    } finally {
      await mcp.close();
    }
    expect(await client.call('hostile.flat', {}, { timeoutMs: 20_000 })).toMatchObject({ isError: false, content: 'flat' });
  }, 120_000);

  it("refuses, at once and on every entrance, an argument that would make a server's declared pattern backtrack for ever", async () => {
    const { url, client } = await hostileFleet();
    // The tools listed with a schema nested 10,000 levels, with refs that multiply on any value, and with schemas too
    // large (2,500 properties) or too deep (100 levels) to compile in bounded time are left out; the server's others
    // are served, the one whose 400 refs reach one definition among them.
    expect((await listed(url)).map((tool) => tool.name).filter((name) => name.startsWith('hostile.')).sort()).toEqual([
      'hostile.backtrack',
      'hostile.bad_answer',
      'hostile.checks',
      'hostile.close_stdout',
      'hostile.deep',
      'hostile.deep_block',
      'hostile.flat',
      'hostile.lookaround',
      'hostile.multiply',
      'hostile.rpc_error',
      'hostile.shared_refs',
      'hostile.union',
      'hostile.unique',
    ]);
    await expect(client.call('hostile.shared_refs', { p399: { q39: 7 } }, { timeoutMs: 20_000 })).rejects.toMatchObject({ code: 'SCHEMA_VALIDATION', message: expect.stringContaining('/p399/q39') as string });
    expect(await client.call('hostile.shared_refs', { p399: { q39: 'seven' } }, { timeoutMs: 20_000 })).toMatchObject({ isError: false });
    // '^(a+)+$' on 60 a's and a '!': years for a backtracking engine, on the dispatcher's one event loop.
    const evil = { s: `${'a'.repeat(60)}!` };
    const refused = fetch(`${url}/v1/calls?wait=20000`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name: 'hostile.backtrack', arguments: evil }) });
    // Another caller's call, sent meanwhile, is answered too.
    expect(await client.call('hostile.flat', {}, { timeoutMs: 20_000 })).toMatchObject({ isError: false, content: 'flat' });
    const res = await refused;
    expect(res.status).toBe(422);
    expect(await res.json()).toMatchObject({ error: { code: 'SCHEMA_VALIDATION', path: '/s' } });
    await expect(client.call('hostile.backtrack', evil, { timeoutMs: 20_000 })).rejects.toMatchObject({ code: 'SCHEMA_VALIDATION' });
    const mcp = new Client({ name: 'backtrack-test', version: '1' });
    await mcp.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`)));
    try {
      const answered = await mcp.callTool({ name: 'hostile.backtrack', arguments: evil });
      expect(answered._meta?.['forge-fleet/error']).toMatchObject({ code: 'SCHEMA_VALIDATION' });
    } finally {
      await mcp.close();
    }
    // A value the pattern takes is called as usual.
    expect(await client.call('hostile.backtrack', { s: 'aaa' }, { timeoutMs: 20_000 })).toMatchObject({ isError: false });
  }, 60_000);

  it("stops checking an argument a lookaround pattern or a multiplying schema would hold, and checks a long array's uniqueness in one pass, on every entrance", async () => {
    const { url, client } = await hostileFleet();
    const post = (name: string, args: unknown) =>
      fetch(`${url}/v1/calls?wait=20000`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name, arguments: args }) });
    // '^(a+)+(?!b)$': a lookahead after the start keeps it off RE2, so it runs on the backtracking engine, years on this value.
    const evil = { s: `${'a'.repeat(60)}!` };
    const slow = post('hostile.lookaround', evil);
    expect(await client.call('hostile.flat', {}, { timeoutMs: 20_000 })).toMatchObject({ isError: false, content: 'flat' });
    const res = await slow;
    expect(res.status).toBe(422);
    const body = (await res.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe('SCHEMA_VALIDATION');
    expect(body.error.message).toContain('^(a+)+(?!b)$');
    await expect(client.call('hostile.lookaround', evil, { timeoutMs: 20_000 })).rejects.toMatchObject({ code: 'SCHEMA_VALIDATION' });
    expect(await client.call('hostile.lookaround', { s: 'aaaa' }, { timeoutMs: 20_000 })).toMatchObject({ isError: false });
    // 20,000 objects (229 KB, under the argument limit): every pair compared, 5 s of the dispatcher's loop each time.
    const xs = Array.from({ length: 20_000 }, (_, i) => ({ a: i }));
    expect((await post('hostile.unique', { xs })).status).toBe(200);
    const twice = [...xs, { a: 17 }];
    const dup = await post('hostile.unique', { xs: twice });
    expect(dup.status).toBe(422);
    expect(await dup.json()).toMatchObject({ error: { code: 'SCHEMA_VALIDATION', path: '/xs', message: expect.stringContaining('items ## 17 and 20000 are identical') as string } });
    // 40,000 items (120 KB) that each fail 1,990 branches: 80 million error objects, which filled the dispatcher's heap
    // until it died. The allowance of problems ends it, and the dispatcher answers the next call.
    const union = await post('hostile.union', { xs: Array.from({ length: 40_000 }, () => ({})) });
    expect(union.status).toBe(422);
    expect(await union.json()).toMatchObject({ error: { code: 'SCHEMA_VALIDATION', message: expect.stringContaining('made more than 100000 problems') as string } });
    expect(await client.call('hostile.union', { xs: [{ k1989: 1 }, { k0: 1 }] }, { timeoutMs: 20_000 })).toMatchObject({ isError: false });
    // 40,000 items that each pass 1,990 checks: 5 to 7 s of the dispatcher's loop per call. The allowance of work ends it.
    const checks = await post('hostile.checks', { xs: Array.from({ length: 40_000 }, () => ({})) });
    expect(checks.status).toBe(422);
    expect(await checks.json()).toMatchObject({ error: { code: 'SCHEMA_VALIDATION', message: expect.stringContaining("of the validator's checks") as string } });
    expect(await client.call('hostile.checks', { xs: [{}, {}] }, { timeoutMs: 20_000 })).toMatchObject({ isError: false });
    // Each of 30 levels evaluated twice by the schema: 2^30 evaluations. The validator's allowance of ref calls ends it.
    let t: unknown[] = [];
    for (let i = 0; i < 30; i++) t = [t];
    const multiplied = await post('hostile.multiply', { t });
    expect(multiplied.status).toBe(422);
    expect(await multiplied.json()).toMatchObject({ error: { code: 'SCHEMA_VALIDATION', message: expect.stringContaining("followed the schema's $refs more than") as string } });
    expect(await client.call('hostile.multiply', { t: [[], [[], []]] }, { timeoutMs: 20_000 })).toMatchObject({ isError: false });
    const mcp = new Client({ name: 'bounded-test', version: '1' });
    await mcp.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`)));
    try {
      for (const [name, args] of [['hostile.lookaround', evil], ['hostile.unique', { xs: twice }], ['hostile.multiply', { t }], ['hostile.union', { xs: Array.from({ length: 40_000 }, () => ({})) }], ['hostile.checks', { xs: Array.from({ length: 40_000 }, () => ({})) }]] as const) {
        const answered = await mcp.callTool({ name, arguments: args });
        expect(answered._meta?.['forge-fleet/error']).toMatchObject({ code: 'SCHEMA_VALIDATION' });
      }
    } finally {
      await mcp.close();
    }
  }, 60_000);

  it('places a tool in the tier the file gives it: a host worker and a platform worker each serve their share of one server', async () => {
    const file = serversFile({ changing: { command: process.execPath, args: [CHANGING], cwd: ROOT, env: { PATH: { fromEnv: 'PATH' } }, tier: 'host', filesystem: undefined, tools: { slow: { tier: 'platform' } } } });
    await t.fleet.worker({ tier: 'host', tools: false, mcp: file });
    await t.fleet.worker({ tier: 'platform', tools: false, mcp: file, env: { FORGE_SANDBOX: 'off' } });
    const { url } = await t.fleet.dispatcher({ FORGE_APPROVAL: 'auto' });
    await until('both tools in the catalog', async () => {
      const tools = await listed(url);
      return tools.some((tool) => tool.name === 'changing.grow') && tools.some((tool) => tool.name === 'changing.slow');
    });
    const tiers = Object.fromEntries((await listed(url)).map((tool) => [tool.name, (tool as { tier?: string }).tier]));
    expect(tiers).toMatchObject({ 'changing.grow': 'host', 'changing.slow': 'platform' });
    t.client = new FleetClient({ url });
    expect(await t.client.call('changing.slow', { ms: 1 }, { timeoutMs: 30_000 })).toMatchObject({ isError: false, content: 'slept 1' });
  });

  it('gives up at once on a sandboxed server whose files are not in its view, and /readyz says what to declare', async () => {
    const port = await freePort();
    // Its cwd (and script) lie outside the view: no start of it can work, so none is retried.
    const file = serversFile({ changing: { command: process.execPath, args: [CHANGING], cwd: ROOT, env: { PATH: { fromEnv: 'PATH' } }, tier: 'platform' } });
    await t.fleet.worker({ tier: 'platform', tools: false, mcp: file, env: { FORGE_SANDBOX: 'on', FORGE_METRICS_PORT: String(port), FORGE_METRICS_HOST: '127.0.0.1' } });
    const body = (await (await fetch(`http://127.0.0.1:${port}/readyz`)).json()) as { servers: { name: string; state: string; error?: string }[] };
    expect(body.servers).toEqual([expect.objectContaining({ name: 'changing', state: 'stopped', error: expect.stringMatching(/cwd|filesystem/) as string })]);
  });

  it('serves a Streamable HTTP upstream, its credential taken from a file and shown nowhere', async () => {
    const token = `upstream-secret-${Date.now()}`;
    const upstream = await startUpstream(token);
    let again: { stop: () => void } | undefined;
    try {
      const dir = mkdtempSync(join(tmpdir(), 'forge-mcp-'));
      writeFileSync(join(dir, 'token'), `Bearer ${token}\n`);
      const file = join(dir, 'servers.yaml');
      writeFileSync(file, stringify({ version: 1, servers: { remote: { url: upstream.url, headers: { Authorization: { fromFile: 'token' } }, prefix: 'up', tier: 'host' } } }));
      const worker = await t.fleet.worker({ tier: 'host', tools: false, mcp: file, env: { FORGE_MCP_RETRY_AFTER_MS: '1500' } });
      const { url } = await t.fleet.dispatcher({ FORGE_APPROVAL: 'auto' });
      t.client = new FleetClient({ url });
      await until('up.echo in the catalog', async () => (await listed(url)).some((tool) => tool.name === 'up.echo'));
      const results = await Promise.all(Array.from({ length: 50 }, (_, i) => t.client!.call('up.echo', { message: `m${i}` }, { timeoutMs: 30_000 })));
      results.forEach((r, i) => expect(r).toMatchObject({ isError: false, content: `Echo: m${i}` }));
      // The upstream gone: its calls fail with a stable code and nothing of the secret. One sent on the dead session ends
      // MCP_SERVER_LOST; one that waited for a new session of an upstream that does not come back ends NO_WORKER, not
      // started (FleetClient throws it: the tool never ran).
      upstream.stop();
      const lost = await t.client.call('up.echo', { message: 'after' }, { timeoutMs: 30_000 }).catch((e: unknown) => e);
      const code = (lost as { error?: { code?: string } }).error?.code ?? (lost as { code?: string }).code;
      expect(code, JSON.stringify(lost)).toMatch(/^(MCP_SERVER_LOST|UNAVAILABLE|NO_WORKER)$/);
      expect(JSON.stringify(lost)).not.toContain(token);
      expect(worker.output()).not.toContain(token);
      expect(JSON.stringify(await listed(url))).not.toContain(token);
      // It crash-loops while down (its tools withdrawn); back on its port, a fresh pool finds it and serves it again.
      await until('up.echo withdrawn', async () => !(await listed(url)).some((tool) => tool.name === 'up.echo'), { timeoutMs: 30_000 });
      again = await startUpstream(token, Number(new URL(upstream.url).port));
      await until('up.echo served again', async () => (await t.client!.call('up.echo', { message: 'back' }, { timeoutMs: 10_000 }).catch(() => undefined))?.content === 'Echo: back', { timeoutMs: 60_000, intervalMs: 500 });
    } finally {
      upstream.stop();
      again?.stop();
    }
  }, 90_000);

  it('serves a Streamable HTTP upstream that speaks only MCP 2026-07-28 on every entrance, its list changes followed', async () => {
    const upstream = await startModernUpstream();
    let mcp: Client | undefined;
    try {
      await t.fleet.worker({ tier: 'host', tools: false, mcp: serversFile({ modern: { url: upstream.url, tier: 'host', instances: { min: 2, max: 2 } } }) });
      const { url } = await t.fleet.dispatcher({ FORGE_APPROVAL: 'auto' });
      t.client = new FleetClient({ url });
      await until('modern.add in the catalog', async () => (await listed(url)).some((tool) => tool.name === 'modern.add'));
      const sums = await Promise.all(Array.from({ length: 40 }, (_, i) => t.client!.call('modern.add', { a: i, b: 1 }, { timeoutMs: 30_000 })));
      sums.forEach((r, i) => expect(r).toMatchObject({ isError: false, structuredContent: { sum: i + 1 } }));
      // The upstream refuses a call without its Mcp-Param-Region header (or with one that disagrees).
      expect(await t.client.call('modern.header', { region: 'Zürich' }, { timeoutMs: 30_000 })).toMatchObject({ isError: false, content: 'region Zürich' });
      const plain = await fetch(`${url}/v1/calls?wait=30000`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name: 'modern.add', arguments: { a: 4, b: 5 } }) });
      expect(((await plain.json()) as { result?: unknown }).result).toMatchObject({ isError: false, structuredContent: { sum: 9 } });
      mcp = new Client({ name: 'modern-http-e2e', version: '0.0.0' });
      await mcp.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`)));
      expect(await mcp.callTool({ name: 'modern.add', arguments: { a: 1, b: 1 } })).toMatchObject({ structuredContent: { sum: 2 } });
      // A tool the upstream adds reaches the catalog through its subscriptions/listen stream.
      expect(await t.client.call('modern.grow', {}, { timeoutMs: 30_000 })).toMatchObject({ isError: false, content: 'grown' });
      await until('modern.added in the catalog', async () => (await listed(url)).some((tool) => tool.name === 'modern.added'), { timeoutMs: 20_000 });
      expect(await t.client.call('modern.added', {}, { timeoutMs: 30_000 })).toMatchObject({ isError: false, content: 'here' });
    } finally {
      await mcp?.close();
      upstream.stop();
    }
  });

  it("keeps a server's secrets out of what its stderr reaches: the worker's log and /readyz", async () => {
    const port = await freePort();
    const secret = `tok-${Date.now()}-secret`;
    // A server that fails at start, printing its token as careless servers do.
    const leaky = { command: process.execPath, args: ['-e', "console.error('bad token: ' + process.env.TOKEN); process.exit(3)"], env: { TOKEN: { fromEnv: 'LEAKY_TOKEN' } }, tier: 'host', restartBackoff: { initialMs: 100, maxMs: 200 }, crashLoop: { failures: 1000 } };
    const file = serversFile({ everything: everything(), leaky });
    const worker = await t.fleet.worker({ tier: 'host', tools: false, mcp: file, env: { LEAKY_TOKEN: secret, FORGE_METRICS_PORT: String(port), FORGE_METRICS_HOST: '127.0.0.1' } });
    // It keeps failing (and being retried); each failure's message carries what it printed.
    let body = '';
    await until('/readyz to show what the server printed', async () => (body = await (await fetch(`http://127.0.0.1:${port}/readyz`)).text()).includes('bad token: [redacted]'));
    expect(body).not.toContain(secret);
    expect(worker.output()).toContain('[redacted]');
    expect(worker.output()).not.toContain(secret);
  });

  it("keeps a secret out of a result's structured content, its keys' values too, and every part of it out of a dying instance's stderr tail", async () => {
    const secret = `tok-${Date.now()}-secret`;
    // Up and serving; its one tool prints the token, then enough that the 4 KiB tail kept for its exit begins one
    // character into the token, and dies. A tail cut before redaction keeps all but the token's first character.
    const server = [
      "const rl = require('node:readline').createInterface({ input: process.stdin });",
      'const send = (m) => process.stdout.write(JSON.stringify({ jsonrpc: "2.0", ...m }) + "\\n");',
      "rl.on('line', (line) => { const m = JSON.parse(line);",
      "  if (m.method === 'initialize') send({ id: m.id, result: { protocolVersion: m.params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: 'dying', version: '1' } } });",
      "  else if (m.method === 'tools/list') send({ id: m.id, result: { tools: [{ name: 'die', inputSchema: { type: 'object' } }, { name: 'leak', inputSchema: { type: 'object' } }] } });",
      "  else if (m.method === 'tools/call' && m.params.name === 'leak') { const t = process.env.TOKEN; send({ id: m.id, result: { content: [{ type: 'text', text: t }], structuredContent: { a: t, b: { [t]: t }, [t]: [t] } } }); }",
      "  else if (m.method === 'tools/call') { const t = process.env.TOKEN; process.stderr.write('T' + t + '\\n' + 'D'.repeat(4095 - t.length) + '\\n', () => process.exit(9)); }",
      "  else if (m.id !== undefined) send({ id: m.id, result: {} }); });",
    ].join('\n');
    const dying = { command: process.execPath, args: ['-e', server], env: { TOKEN: { fromEnv: 'DYING_TOKEN' } }, tier: 'host' };
    const worker = await t.fleet.worker({ tier: 'host', tools: false, mcp: serversFile({ dying }), env: { DYING_TOKEN: secret } });
    const { url } = await t.fleet.dispatcher({ FORGE_APPROVAL: 'auto' });
    t.client = new FleetClient({ url });
    await until('dying.die in the catalog', async () => (await listed(url)).some((tool) => tool.name === 'dying.die'));
    const leakId = `leak-${randomUUID()}`;
    const leaked = await t.client.call('dying.leak', {}, { id: leakId, timeoutMs: 30_000 });
    expect(leaked).toMatchObject({ isError: false, content: '[redacted]', structuredContent: { a: '[redacted]', b: { '[redacted]': '[redacted]' }, '[redacted]': ['[redacted]'] } });
    expect(JSON.stringify(await t.client.get(leakId))).not.toContain(secret);
    const result = await t.client.call('dying.die', {}, { timeoutMs: 30_000 });
    expect(result.error?.code).toBe('MCP_SERVER_LOST');
    await until('the worker to log the instance that died', () => worker.output().includes('MCP server instance died'));
    for (const text of [worker.output(), JSON.stringify(result)]) {
      expect(text).not.toContain(secret.slice(1));
      expect(text).not.toContain(secret.slice(0, -1));
    }
  });

  it('refuses to start when a tools module and a server offer the same name, saying which', async () => {
    const module = join(mkdtempSync(join(tmpdir(), 'forge-mcp-')), 'clash.mjs');
    writeFileSync(module, `import { defineTool } from '${join(ROOT, 'packages/shared/src/index.ts')}';\nexport default [defineTool({ name: 'everything.echo', tier: 'host', handler: () => 'mine' })];\n`);
    const file = serversFile({ everything: everything() });
    await expect(t.fleet.worker({ tier: 'host', tools: module, mcp: file })).rejects.toThrow(/both offer everything\.echo/);
  });

  it('refuses the same clash when the server is slower than the start-up head start: one answer for one configuration', async () => {
    const module = join(mkdtempSync(join(tmpdir(), 'forge-mcp-')), 'clash.mjs');
    writeFileSync(module, `import { defineTool } from '${join(ROOT, 'packages/shared/src/index.ts')}';\nexport default [defineTool({ name: 'odd.say', tier: 'host', handler: () => 'mine' })];\n`);
    // Its tools are listed 5 s in, after the worker began to serve: before, it served on, the module's tool winning.
    const file = serversFile({ odd: { command: process.execPath, args: [ODD_SERVER], env: { SLOW_INIT_MS: '5000' }, tier: 'host' } });
    await expect(t.fleet.worker({ tier: 'host', tools: module, mcp: file })).rejects.toThrow(/CONFIG_INVALID: .*both offer odd\.say/);
  });

  it('answers its probes while its servers are on their first start: /healthz 200, /readyz 503 naming each server starting', async () => {
    const port = await freePort();
    const file = serversFile({ odd: { command: process.execPath, args: [ODD_SERVER], env: { SLOW_INIT_MS: '600000' }, tier: 'host', startupTimeoutMs: 600_000 } });
    // Before, the probes listened only once the worker served, 3 s into its servers' start.
    await t.fleet.worker({ tier: 'host', tools: false, mcp: file, readyLine: 'MCP servers starting', env: { FORGE_METRICS_PORT: String(port), FORGE_METRICS_HOST: '127.0.0.1' } });
    expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).toBe(200);
    const ready = await fetch(`http://127.0.0.1:${port}/readyz`);
    expect(ready.status).toBe(503);
    expect(await ready.json()).toMatchObject({ ok: false, servers: [{ name: 'odd', state: 'starting' }] });
  });

  it('refuses a worker whose lane the file places nothing in', async () => {
    const file = serversFile({ everything: everything({ pool: 'mcp' }) });
    await expect(t.fleet.worker({ tier: 'host', pool: 'other', tools: false, mcp: file })).rejects.toThrow(/places no server/);
  });
});
