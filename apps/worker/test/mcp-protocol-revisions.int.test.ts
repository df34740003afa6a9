import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { SUPPORTED_PROTOCOL_VERSIONS } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { HttpMcpInstance } from '../src/mcp-servers/http-instance.js';
import { McpInstance } from '../src/mcp-servers/instance.js';
import { findLaunchTools, type LaunchTools } from '../src/mcp-servers/launch-command.js';
import { McpServerPool } from '../src/mcp-servers/server-pool.js';
import { probeIsolation } from '../src/sandbox/probe.js';
import { failureOf } from './fixtures/fleet-failure.js';
import { closeTracked, track } from './fixtures/tracked.js';

// Servers written on the v2 SDK, the SDK of MCP 2026-07-28: by default they serve 2025-era clients as well,
// which is what the worker's client speaks; one built to refuse those clients must say so, not fail obscurely.
const V2_SERVER = fileURLToPath(new URL('./fixtures/mcp-v2-server.mjs', import.meta.url));

let tools: LaunchTools;

/** The fixture in http mode, on `port` (else an ephemeral one); `stderr` is what it has written there. */
async function startHttp(era: 'serve' | 'reject', port = 0): Promise<{ url: string; port: number; stderr(): string; close(): Promise<void> }> {
  const child: ChildProcess = spawn(process.execPath, [V2_SERVER, 'http', era, String(port)], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const close = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await exited;
  };
  const listening = await new Promise<number>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`the fixture exited (${code}) before listening`)));
    if (child.stdout === null) throw new Error('no stdout');
    createInterface({ input: child.stdout }).once('line', (line) => resolve((JSON.parse(line) as { port: number }).port));
  });
  return track({ url: `http://127.0.0.1:${listening}/mcp`, port: listening, stderr: () => stderr, close });
}

/** Starts the fixture's 10 s `slow` tool and cancels it after its first step: the call must end CANCELLED. */
async function cancelMidway(instance: McpInstance | HttpMcpInstance): Promise<void> {
  const abort = new AbortController();
  let running: Promise<unknown> | undefined;
  await new Promise<void>((resolve) => {
    running = instance.callTool('slow', { steps: 500, ms: 20 }, { timeoutMs: 60_000, signal: abort.signal, onProgress: () => resolve() });
  });
  abort.abort();
  expect(await failureOf(running ?? Promise.resolve())).toMatchObject({ code: 'CANCELLED' });
}

const stdio = (era: 'serve' | 'reject') => ({ command: process.execPath, args: [V2_SERVER, 'stdio', era], env: {}, startupTimeoutMs: 20_000 });

beforeAll(() => {
  tools = findLaunchTools(probeIsolation(), process.env.PATH ?? '');
});

afterEach(closeTracked);

describe('a server built on the v2 SDK (MCP 2026-07-28)', () => {
  it('serves its tools over stdio: list, call, structured content', async () => {
    const pool = track(new McpServerPool({ server: 'v2', launch: stdio('serve'), instances: { min: 1, max: 1 } }, tools));
    await pool.start();
    const listed = (await pool.listTools()).tools;
    expect(listed.map((t) => t.name).sort()).toEqual(['add', 'grow', 'header', 'slow']);
    expect(listed.find((t) => t.name === 'add')?.outputSchema).toMatchObject({ type: 'object', properties: { sum: { type: 'number' } } });
    expect(await pool.call({ tool: 'add', arguments: { a: 2, b: 40 } })).toMatchObject({ content: [{ type: 'text', text: '42' }], structuredContent: { sum: 42 } });
  });

  it('serves its tools as a Streamable HTTP upstream', async () => {
    const upstream = await startHttp('serve');
    const pool = track(new McpServerPool({ server: 'v2http', launch: { url: upstream.url }, instances: { min: 1, max: 1 } }, tools));
    await pool.start();
    expect((await pool.listTools()).tools.map((t) => t.name).sort()).toEqual(['add', 'grow', 'header', 'slow']);
    expect(await pool.call({ tool: 'add', arguments: { a: 1, b: 2 } })).toMatchObject({ structuredContent: { sum: 3 } });
  });

  it('that serves 2026-07-28 only is served over stdio all the same: list, call, structured content, a second instance', async () => {
    const pool = track(new McpServerPool({ server: 'modern', launch: stdio('reject'), instances: { min: 2, max: 2 } }, tools));
    await pool.start();
    expect(pool.status().instances).toHaveLength(2);
    const listed = (await pool.listTools()).tools;
    expect(listed.map((t) => t.name).sort()).toEqual(['add', 'grow', 'header', 'slow']);
    expect(listed.find((t) => t.name === 'add')?.outputSchema).toMatchObject({ properties: { sum: { type: 'number' } } });
    const sums = await Promise.all([1, 2, 3, 4].map((a) => pool.call({ tool: 'add', arguments: { a, b: 10 } })));
    expect(sums.map((r) => r.structuredContent)).toEqual([{ sum: 11 }, { sum: 12 }, { sum: 13 }, { sum: 14 }]);
  });

  it('that serves 2026-07-28 only gets its progress to the caller, a cancel to the server, and a still-answering check', async () => {
    const instance = track(await McpInstance.start({ server: 'modern', launch: stdio('reject'), tools }));
    const progress: number[] = [];
    const counted = await instance.callTool('slow', { steps: 3, ms: 10 }, { timeoutMs: 10_000, onProgress: (p) => progress.push(p.progress) });
    expect(counted.content).toEqual([{ type: 'text', text: 'counted 3' }]);
    expect(progress).toEqual([1, 2, 3]);

    await cancelMidway(instance);
    // The server's handler saw the cancel and stopped (it says so on stderr), long before its 10 s of steps.
    await expect.poll(() => instance.stderrTail, { timeout: 5_000 }).toContain('slow: cancelled at step');
    expect(instance.alive).toBe(true);
    // Removed in 2026-07-28; the bridge asks the server's discovery instead.
    expect(await instance.ping(5_000)).toBe(true);
    expect(await instance.callTool('add', { a: 1, b: 1 }, { timeoutMs: 10_000 })).toMatchObject({ structuredContent: { sum: 2 } });
  });

  it('that serves 2026-07-28 only tells the pool when its tool list changes', async () => {
    const pool = track(new McpServerPool({ server: 'modern', launch: stdio('reject'), instances: { min: 1, max: 1 } }, tools));
    await pool.start();
    const changed = new Promise<void>((resolve) => pool.once('toolsChanged', () => resolve()));
    expect(await pool.call({ tool: 'grow', arguments: {} })).toMatchObject({ content: [{ type: 'text', text: 'grown' }] });
    await changed;
    expect((await pool.listTools()).tools.map((t) => t.name).sort()).toEqual(['add', 'added', 'grow', 'header', 'slow']);
  });

  it('that serves 2026-07-28 only is served as a Streamable HTTP upstream too: list, call, headers, progress, two connections', async () => {
    const upstream = await startHttp('reject');
    const pool = track(new McpServerPool({ server: 'modern-http', launch: { url: upstream.url }, instances: { min: 2, max: 2 } }, tools));
    await pool.start();
    expect(pool.status().instances).toHaveLength(2);
    expect(pool.status().instances.every((i) => i.id.startsWith('2026-07-28 connection to'))).toBe(true);
    const listed = (await pool.listTools()).tools;
    expect(listed.map((t) => t.name).sort()).toEqual(['add', 'grow', 'header', 'slow']);
    expect(listed.find((t) => t.name === 'header')?.inputSchema).toMatchObject({ properties: { region: { type: 'string', 'x-mcp-header': 'Region' } } });
    const sums = await Promise.all([1, 2, 3, 4].map((a) => pool.call({ tool: 'add', arguments: { a, b: 10 } })));
    expect(sums.map((r) => r.structuredContent)).toEqual([{ sum: 11 }, { sum: 12 }, { sum: 13 }, { sum: 14 }]);
    // The server refuses a call whose Mcp-Param-Region header is missing or differs: plain ASCII and base64-sentinel values both arrive.
    // At once, so both connections carry some, the one that did not list the tools included.
    const regions = ['eu-west-1', 'São Paulo ', '=?base64?x?=', 'us-east-2', '東京', ' '];
    const echoed = await Promise.all(regions.map((region) => pool.call({ tool: 'header', arguments: { region } })));
    expect(echoed.map((r) => r.content)).toEqual(regions.map((region) => [{ type: 'text', text: `region ${region}` }]));
    const progress: number[] = [];
    const counted = await pool.call({ tool: 'slow', arguments: { steps: 3, ms: 10 }, onProgress: (p) => progress.push(p.progress) });
    expect(counted.content).toEqual([{ type: 'text', text: 'counted 3' }]);
    expect(progress).toEqual([1, 2, 3]);
  });

  it('that serves 2026-07-28 only over HTTP gets a cancel (its request is aborted), a still-answering check and its list changes', async () => {
    const upstream = await startHttp('reject');
    const changes: string[] = [];
    const instance = track(await HttpMcpInstance.start({ server: 'modern-http', launch: { url: upstream.url, headers: {}, startupTimeoutMs: 10_000 }, onToolsChanged: () => changes.push('changed') }));
    await cancelMidway(instance);
    // The server's handler saw its request aborted and stopped (it says so on stderr), long before its 10 s of steps.
    await expect.poll(() => upstream.stderr(), { timeout: 5_000 }).toContain('slow: cancelled at step');
    expect(instance.alive).toBe(true);
    expect(await instance.ping(5_000)).toBe(true);
    // A timeout aborts the request the same way.
    expect(await failureOf(instance.callTool('slow', { steps: 500, ms: 20 }, { timeoutMs: 300 }))).toMatchObject({ code: 'EXECUTION_TIMEOUT' });
    await expect.poll(() => upstream.stderr().split('slow: cancelled').length, { timeout: 5_000 }).toBe(3);
    expect(await instance.callTool('grow', {}, { timeoutMs: 10_000 })).toMatchObject({ content: [{ type: 'text', text: 'grown' }] });
    await expect.poll(() => changes.length, { timeout: 5_000 }).toBeGreaterThan(0);
    expect((await instance.listTools({ timeoutMs: 10_000 })).tools.map((t) => t.name)).toContain('added');
    expect(instance.alive).toBe(true);
  });

  it('that serves 2026-07-28 only over HTTP is served again after the upstream restarts, its list changes still followed', async () => {
    const first = await startHttp('reject');
    const pool = track(new McpServerPool({ server: 'modern-http', launch: { url: first.url }, instances: { min: 1, max: 1 }, restart: { initialDelayMs: 50, maxDelayMs: 200, crashLoopFailures: 1000 } }, tools));
    await pool.start();
    expect(await pool.call({ tool: 'add', arguments: { a: 1, b: 2 } })).toMatchObject({ structuredContent: { sum: 3 } });
    await first.close();
    const second = await startHttp('reject', first.port);
    await expect.poll(async () => (await pool.call({ tool: 'add', arguments: { a: 2, b: 2 } }).catch(() => undefined))?.structuredContent, { timeout: 10_000, interval: 100 }).toEqual({ sum: 4 });
    const changed = new Promise<void>((resolve) => pool.once('toolsChanged', () => resolve()));
    expect(await pool.call({ tool: 'grow', arguments: {} })).toMatchObject({ content: [{ type: 'text', text: 'grown' }] });
    await changed;
    expect((await pool.listTools()).tools.map((t) => t.name)).toContain('added');
    expect(second.stderr()).not.toContain('Rejected inbound request');
  });

  it('that serves only a revision the worker does not speak fails to start over HTTP saying so, not as a bare HTTP 400', async () => {
    const upstream = await startHttp('reject');
    const failure = await failureOf(HttpMcpInstance.start({ server: 'future-http', launch: { url: `${upstream.url}?future`, headers: {}, startupTimeoutMs: 10_000 } }));
    expect(failure.code).toBe('UNAVAILABLE');
    expect(failure.message).toContain('it speaks only MCP 2099-01-01');
    expect(failure.message).toContain(`${[...SUPPORTED_PROTOCOL_VERSIONS, '2026-07-28'].join(', ')} here`);
    expect(failure.message).not.toContain('HTTP 400');
  });
});
