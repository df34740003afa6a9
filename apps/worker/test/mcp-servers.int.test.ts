import { mkdtempSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ToolResult } from '@forge-fleet/shared';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { type CallToolResult, ListTasksResultSchema as TASK_LIST } from '@modelcontextprotocol/sdk/types.js';
import { pino } from 'pino';
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { MAX_MESSAGE_BYTES, messageBoundFor } from '../src/mcp-servers/answer-lines.js';
import { McpInstance } from '../src/mcp-servers/instance.js';
import { McpToolExecutor } from '../src/mcp-servers/mcp-tool-executor.js';
import { findLaunchTools, type LaunchTools } from '../src/mcp-servers/launch-command.js';
import { McpServerPool } from '../src/mcp-servers/server-pool.js';
import type { McpServerConfig } from '../src/mcp-servers/servers-file.js';
import { WorkerServers } from '../src/mcp-servers/worker-servers.js';
import { callAsTask } from '../src/mcp-servers/task-call.js';
import { probeIsolation } from '../src/sandbox/probe.js';
import { startPoolChild } from './fixtures/pool-child.js';
import { processTable } from './fixtures/proc-table.js';
import { failureOf } from './fixtures/fleet-failure.js';
import { serverConfig } from './fixtures/server-config.js';
import { closeTracked, track } from './fixtures/tracked.js';

const require = createRequire(import.meta.url);
const EVERYTHING = join(dirname(require.resolve('@modelcontextprotocol/server-everything/package.json')), 'dist/index.js');
const PROBE_SERVER = fileURLToPath(new URL('./fixtures/mcp-probe-server.mjs', import.meta.url));
/** A raw JSON-RPC server that does one thing wrong, chosen by MODE (see the file). */
const ODD_SERVER = fileURLToPath(new URL('./fixtures/odd-mcp-server.mjs', import.meta.url));
const LEAVER = fileURLToPath(new URL('./fixtures/sandbox-mcp-probe-server.mjs', import.meta.url));
const POOL_CHILD = fileURLToPath(new URL('./fixtures/mcp-pool-child.ts', import.meta.url));
const ROOT = fileURLToPath(new URL('../../..', import.meta.url));

const everything = { command: process.execPath, args: [EVERYTHING, 'stdio'] };
const probeServer = { command: process.execPath, args: [PROBE_SERVER] };
/** Bounded waits for what the pool does in the background. */
const WAIT = { timeout: 15_000, interval: 20 };

let tools: LaunchTools;

/** The pids of a pool's instances (all of them stdio processes here). */
function pidsOf(pool: McpServerPool): number[] {
  return pool.status().instances.map((i) => {
    if (i.pid === undefined) throw new Error(`instance ${i.id} has no pid`);
    return i.pid;
  });
}

function textOf(result: CallToolResult): string {
  return result.content.map((block) => (block.type === 'text' ? block.text : '')).join('');
}

/** Processes (zombies too) whose process group is one of `groups`, read from /proc. */
function processesInGroups(groups: readonly number[]): { pid: number; state: string }[] {
  return processTable()
    .filter((p) => groups.includes(p.pgrp))
    .map(({ pid, state }) => ({ pid, state }));
}

beforeAll(() => {
  tools = findLaunchTools(probeIsolation(), process.env.PATH ?? '');
});

afterEach(closeTracked);

describe('one MCP server instance', () => {
  it('lists the tools of server-everything and echoes', async () => {
    const instance = track(await McpInstance.start({ server: 'everything', launch: { ...everything, env: {}, startupTimeoutMs: 20_000 }, tools }));
    const listed = (await instance.listTools({ timeoutMs: 10_000 })).tools;
    expect(listed.map((t) => t.name)).toEqual(expect.arrayContaining(['echo', 'get-sum', 'trigger-long-running-operation']));
    expect(listed.find((t) => t.name === 'echo')?.inputSchema).toMatchObject({ type: 'object', properties: { message: { type: 'string' } } });
    expect(textOf(await instance.callTool('echo', { message: 'hello' }, { timeoutMs: 10_000 }))).toBe('Echo: hello');
  });

  it('sees exactly the environment it was given, in a process group of its own', async () => {
    const instance = track(await McpInstance.start({ server: 'everything', launch: { ...everything, env: { FORGE_PROBE: 'yes' }, startupTimeoutMs: 20_000 }, tools }));
    expect(JSON.parse(textOf(await instance.callTool('get-env', {}, { timeoutMs: 10_000 })))).toEqual({ FORGE_PROBE: 'yes' });
    expect(processesInGroups([instance.pid]).map((p) => p.pid)).toContain(instance.pid);
    expect(processesInGroups([process.pid]).map((p) => p.pid)).not.toContain(instance.pid);
  });

  it('keeps its group\'s reaper as the worker\'s own child, and leaves neither it nor a zombie when it ends', async () => {
    const entry = (pid: number | undefined): { ppid: number; state: string } | undefined => processTable().find((p) => p.pid === pid);
    const closed = track(await McpInstance.start({ server: 'everything', launch: { ...everything, env: {}, startupTimeoutMs: 20_000 }, tools }));
    const crashed = track(await McpInstance.start({ server: 'everything', launch: { ...everything, env: {}, startupTimeoutMs: 20_000 }, tools }));
    for (const instance of [closed, crashed]) {
      expect(instance.reaperPid).toEqual(expect.any(Number));
      // Not the server's child: a server that ends would leave it (and its zombie) to PID 1.
      expect(entry(instance.reaperPid)?.ppid).toBe(process.pid);
      expect(processesInGroups([instance.pid]).map((p) => p.pid)).not.toContain(instance.reaperPid);
    }
    await closed.close();
    process.kill(crashed.pid, 'SIGKILL');
    // Gone from /proc altogether: the worker reaped it, so not even a zombie is left for PID 1.
    await vi.waitFor(() => {
      expect(entry(closed.reaperPid)).toBeUndefined();
      expect(entry(crashed.reaperPid)).toBeUndefined();
      expect(processesInGroups([closed.pid, crashed.pid])).toEqual([]);
    }, WAIT);
  });

  it('fails to start with UNAVAILABLE and the server stderr when the process exits at once', async () => {
    const launch = { command: process.execPath, args: ['-e', 'console.error("no config here"); process.exit(3)'], env: {}, startupTimeoutMs: 10_000 };
    const failure = await failureOf(McpInstance.start({ server: 'broken', launch, tools }));
    expect(failure.code).toBe('UNAVAILABLE');
    expect(failure.message).toContain("MCP server 'broken'");
  });

  it('passes on progress of a long-running tool', async () => {
    const instance = track(await McpInstance.start({ server: 'everything', launch: { ...everything, env: {}, startupTimeoutMs: 20_000 }, tools }));
    const progress: number[] = [];
    const result = await instance.callTool('trigger-long-running-operation', { duration: 0.3, steps: 3 }, { timeoutMs: 10_000, onProgress: (p) => progress.push(p.progress) });
    expect(textOf(result)).toContain('Long running operation completed');
    // Every step, the last one too (sent just before the result, which the SDK's own progress routing lost).
    expect(progress).toEqual([1, 2, 3]);
  });

  it('sends notifications/cancelled on abort, and the call ends with CANCELLED', async () => {
    const instance = track(await McpInstance.start({ server: 'probe', launch: { ...probeServer, env: {}, startupTimeoutMs: 20_000 }, tools }));
    const controller = new AbortController();
    // Aborted once the server runs the call: an abort before the request is sent needs no cancel.
    const call = instance.callTool('wait', {}, { timeoutMs: 20_000, signal: controller.signal, onProgress: () => controller.abort(new Error('the agent gave up')) });
    const failure = await failureOf(call);
    expect(failure.code).toBe('CANCELLED');
    expect(failure.message).toContain('the agent gave up');
    // The server saw the cancel: its handler's signal fired.
    await vi.waitFor(async () => expect(textOf(await instance.callTool('cancellations', {}, { timeoutMs: 10_000 }))).toBe('1'), WAIT);
  });
});

describe('a pool of MCP server instances', () => {
  it('answers 200 concurrent calls over 2 instances of 8 calls each', async () => {
    const pool = track(new McpServerPool({ server: 'everything', launch: everything, instances: { min: 2, max: 2, callsPerInstance: 8 } }, tools));
    await pool.start();
    let mostInFlight = 0;
    const calls = Array.from({ length: 200 }, async (_, i) => {
      const result = await pool.call({ tool: 'echo', arguments: { message: `m${i}` } });
      mostInFlight = Math.max(mostInFlight, ...pool.status().instances.map((s) => s.inFlight));
      return textOf(result);
    });
    expect(pool.status().waiting).toBe(200 - 16);
    expect(await Promise.all(calls)).toEqual(Array.from({ length: 200 }, (_, i) => `Echo: m${i}`));
    expect(mostInFlight).toBeLessThanOrEqual(8);
    expect(pool.status().instances).toHaveLength(2);
  });

  it('holds a reserved slot for its call: others wait behind it, a release or the call frees it, a stopped wait rejects', async () => {
    const pool = track(new McpServerPool({ server: 'everything', launch: everything, instances: { min: 1, max: 1, callsPerInstance: 1 } }, tools));
    await pool.start();
    const held = await pool.reserve(undefined, 'everything.echo');
    expect(pool.status().instances[0]?.inFlight).toBe(1);
    // The one slot is held: a second reservation waits, and a stopped wait fails as a cancel, leaving the slot alone.
    let stopWait!: (reason: unknown) => void;
    const second = pool.reserve(undefined, 'everything.echo', (cancel) => (stopWait = cancel));
    expect(pool.status().waiting).toBe(1);
    stopWait('the worker hands the call back');
    expect(await failureOf(second)).toMatchObject({ code: 'CANCELLED' });
    expect(pool.status()).toMatchObject({ waiting: 0, instances: [{ inFlight: 1 }] });
    // A release gives the slot to the next in line; a second release does not free it twice.
    const third = pool.reserve(undefined, 'everything.echo');
    held.release();
    held.release();
    const slot = await third;
    expect(pool.status().instances[0]?.inFlight).toBe(1);
    // The call runs on its reserved slot (no second slot is taken), frees it when done, and the slot's release is then a no-op.
    expect(textOf(await pool.call({ tool: 'echo', arguments: { message: 'on my slot' } }, slot))).toBe('Echo: on my slot');
    slot.release();
    expect(pool.status().instances[0]?.inFlight).toBe(0);
    // A slot whose instance died before its call ran is given back, and the call gets a slot of the replacement.
    const orphan = await pool.reserve(undefined, 'everything.echo');
    const [pid] = pidsOf(pool);
    process.kill(pid!, 'SIGKILL');
    await vi.waitFor(() => expect(pidsOf(pool).filter((p) => p !== pid)).toHaveLength(1), WAIT);
    expect(textOf(await pool.call({ tool: 'echo', arguments: { message: 'after' } }, orphan))).toBe('Echo: after');
    expect(pool.status().instances[0]?.inFlight).toBe(0);
  });

  it('reads its tools before the calls waiting for a slot: a worker holding many calls of a busy server still follows its list', async () => {
    const pool = track(new McpServerPool({ server: 'everything', launch: everything, instances: { min: 1, max: 1, callsPerInstance: 1 } }, tools));
    await pool.start();
    const order: string[] = [];
    const call = (n: number): Promise<void> => pool.call({ tool: 'trigger-long-running-operation', arguments: { duration: 0.3, steps: 1 } }).then(() => void order.push(`call ${n}`));
    const calls = [1, 2, 3, 4].map(call);
    await vi.waitFor(() => expect(pool.status().waiting).toBe(3), WAIT);
    const listing = pool.listTools().then(() => void order.push('listing'));
    await Promise.all([...calls, listing]);
    // The running call ends first; the listing takes the next slot, before the three that waited longer.
    expect(order).toEqual(['call 1', 'listing', 'call 2', 'call 3', 'call 4']);
  });

  it('fails a call whose instance is killed with a typed error, and replaces the instance', async () => {
    const pool = track(new McpServerPool({ server: 'everything', launch: everything, instances: { min: 1, max: 1 }, restart: { initialDelayMs: 10 } }, tools));
    await pool.start();
    const [firstPid] = pidsOf(pool);
    if (firstPid === undefined) throw new Error('no instance started');
    const first = { pid: firstPid };
    let started!: () => void;
    const running = new Promise<void>((resolve) => (started = resolve));
    const call = pool.call({ tool: 'trigger-long-running-operation', arguments: { duration: 60, steps: 600 }, onProgress: () => started() });
    await running;
    process.kill(first.pid, 'SIGKILL');
    expect(await failureOf(call)).toMatchObject({ code: 'MCP_SERVER_LOST', details: { server: 'everything', instance: `pid ${first.pid}` } });
    await vi.waitFor(() => expect(pool.status().instances.filter((i) => i.pid !== first.pid)).toHaveLength(1), WAIT);
    expect(textOf(await pool.call({ tool: 'echo', arguments: { message: 'again' } }))).toBe('Echo: again');
  });

  it('takes an answer past the default bound from a pool given a larger one (a worker with a larger FORGE_MAX_RESULT_BYTES)', async () => {
    const bound = messageBoundFor(32 * 1024 * 1024);
    const pool = track(new McpServerPool({ server: 'probe', launch: { ...probeServer, maxMessageBytes: bound }, instances: { min: 1, max: 1 } }, tools));
    await pool.start();
    expect(textOf(await pool.call({ tool: 'huge', arguments: {} }))).toHaveLength(20 * 1024 * 1024);
    // And the default bound is what refuses it: the failure names it.
    const small = track(new McpServerPool({ server: 'probe-default', launch: probeServer, instances: { min: 1, max: 1 } }, tools));
    await small.start();
    const failure = await failureOf(small.call({ tool: 'huge', arguments: {} }));
    expect(failure).toMatchObject({ code: 'RESOURCE_LIMIT' });
    expect(failure.message).toContain(`over the ${MAX_MESSAGE_BYTES} a server's message may be`);
    expect(messageBoundFor(1024 * 1024)).toBe(MAX_MESSAGE_BYTES);
  });

  it('fails only the call whose answer is too large, with RESOURCE_LIMIT, and the instance serves on (also past a crash loop\'s count)', async () => {
    const pool = track(new McpServerPool({ server: 'probe', launch: probeServer, instances: { min: 1, max: 1 }, callsPerInstance: 8 }, tools));
    await pool.start();
    const [pid] = pidsOf(pool);
    // A call in flight beside them must not be cut short either.
    let besideSettled = false;
    const beside = pool.call({ tool: 'wait', arguments: {} }).finally(() => (besideSettled = true));
    for (let i = 0; i < 6; i += 1) {
      expect(await failureOf(pool.call({ tool: 'huge', arguments: {} }))).toMatchObject({ code: 'RESOURCE_LIMIT', details: { toolName: 'huge', limit: 'output' } });
    }
    expect(textOf(await pool.call({ tool: 'huge-notice', arguments: {} }))).toBe('after the notice');
    expect(pidsOf(pool)).toEqual([pid]);
    expect(pool.status().state).toBe('running');
    expect(textOf(await pool.call({ tool: 'pid', arguments: {} }))).toBe(String(pid));
    expect(besideSettled).toBe(false);
    // Watched before the close that fails it: closing waits for the instance's reaper, after the call has failed.
    const besideFailure = failureOf(beside);
    await pool.close();
    expect(await besideFailure).toMatchObject({ code: 'MCP_SERVER_LOST' });
  });

  it('replaces an instance that stops answering after a call timed out', async () => {
    const pool = track(new McpServerPool({ server: 'probe', launch: probeServer, instances: { min: 1, max: 1 }, pingTimeoutMs: 200, restart: { initialDelayMs: 10 } }, tools));
    await pool.start();
    const frozen = pidsOf(pool)[0];
    await expect(pool.call({ tool: 'freeze', arguments: {}, timeoutMs: 200 })).rejects.toMatchObject({ code: 'EXECUTION_TIMEOUT' });
    await vi.waitFor(() => expect(pool.status().instances.map((i) => i.pid).filter((pid) => pid !== frozen)).toHaveLength(1), WAIT);
    await vi.waitFor(() => expect(processesInGroups(frozen === undefined ? [] : [frozen])).toEqual([]), WAIT);
    expect(textOf(await pool.call({ tool: 'cancellations', arguments: {} }))).toBe('0');
  });

  it("replaces an instance that stops answering after a call was cancelled, as the fleet's own tool timeout (the file's timeoutMs) cancels it", async () => {
    const pool = track(new McpServerPool({ server: 'probe', launch: probeServer, instances: { min: 1, max: 1 }, pingTimeoutMs: 200, restart: { initialDelayMs: 10 } }, tools));
    await pool.start();
    const frozen = pidsOf(pool)[0];
    // The runner aborts the call's signal at the tool's timeoutMs, before the pool's own (longer) timeout.
    const controller = new AbortController();
    const call = pool.call({ tool: 'freeze', arguments: {}, signal: controller.signal, timeoutMs: 60_000 });
    await vi.waitFor(() => expect(pool.status().instances[0]?.inFlight).toBe(1), WAIT);
    controller.abort(new Error('the tool timed out'));
    await expect(call).rejects.toMatchObject({ code: 'CANCELLED' });
    await vi.waitFor(() => expect(pool.status().instances.map((i) => i.pid).filter((pid) => pid !== frozen)).toHaveLength(1), WAIT);
    expect(textOf(await pool.call({ tool: 'pid', arguments: {} }))).not.toBe(String(frozen));
  });

  it('passes on each line a server writes to its stderr, for the worker\'s log, with its secret values redacted', async () => {
    const launch = { ...probeServer, env: { PROBE_SECRET: 'sk-probe-secret-1' }, secrets: ['sk-probe-secret-1'] };
    const pool = track(new McpServerPool({ server: 'probe', launch, instances: { min: 1, max: 1 } }, tools));
    const lines: string[] = [];
    pool.on('stderr', ({ line, pid }) => lines.push(`${pid}: ${line}`));
    await pool.start();
    const pid = pidsOf(pool)[0];
    expect(textOf(await pool.call({ tool: 'say-on-stderr', arguments: {} }))).toBe('said');
    await vi.waitFor(() => expect(lines).toEqual(expect.arrayContaining([`${pid}: probe says hello`, `${pid}: secret is [redacted]`])), WAIT);
    expect(lines.join('\n')).not.toContain('sk-probe-secret-1');
  });

  it('stops for good on a crash loop, and calls then fail with UNAVAILABLE', async () => {
    const launch = { command: process.execPath, args: ['-e', 'process.exit(1)'] };
    const pool = track(new McpServerPool({ server: 'crashing', launch, instances: { min: 1, max: 1 }, restart: { initialDelayMs: 1, maxDelayMs: 5, crashLoopFailures: 3 } }, tools));
    const stopped = new Promise((resolve) => pool.once('stopped', resolve));
    await expect(pool.start()).rejects.toMatchObject({ code: 'UNAVAILABLE' });
    await stopped;
    expect(pool.status().state).toBe('stopped');
    const failure = await failureOf(pool.call({ tool: 'anything', arguments: {} }));
    expect(failure.code).toBe('UNAVAILABLE');
    expect(failure.message).toContain('not restarted again');
    // The last failure's reason, said once: not a message nested in a message.
    expect(failure.message).toMatch(/; last: its process exited with status 1 before answering initialize/);
    expect(failure.message.match(/send the request again/g)).toHaveLength(1);
  });

  it('pins each caller to an instance of its own in perCaller mode, and reaps an idle session', async () => {
    const pool = track(new McpServerPool({ server: 'probe', launch: probeServer, session: 'perCaller', instances: { min: 0, max: 2, idleMs: 300 } }, tools));
    await pool.start();
    const pidOf = async (caller: string): Promise<string> => textOf(await pool.call({ tool: 'pid', arguments: {}, caller }));
    const alice = await Promise.all(Array.from({ length: 10 }, () => pidOf('alice')));
    const bob = await Promise.all(Array.from({ length: 10 }, () => pidOf('bob')));
    expect(new Set(alice).size).toBe(1);
    expect(new Set(bob).size).toBe(1);
    expect(alice[0]).not.toBe(bob[0]);
    await expect(pool.call({ tool: 'pid', arguments: {} })).rejects.toMatchObject({ code: 'BAD_REQUEST' });
    // Idle sessions end with their instances: the state of one caller never reaches another.
    await vi.waitFor(() => expect(processesInGroups([Number(alice[0]), Number(bob[0])])).toEqual([]), WAIT);
    expect(pool.status().instances).toEqual([]);
  });

  it('sends notifications/cancelled when a pooled call is aborted, and the instance serves on', async () => {
    const pool = track(new McpServerPool({ server: 'probe', launch: probeServer, instances: { min: 1, max: 1 } }, tools));
    await pool.start();
    const controller = new AbortController();
    const call = pool.call({ tool: 'wait', arguments: {}, signal: controller.signal, onProgress: () => controller.abort(new Error('the agent gave up')) });
    const failure = await failureOf(call);
    expect(failure.code).toBe('CANCELLED');
    expect(failure.message).toContain('the agent gave up');
    // The one instance saw the cancel (its handler's signal fired) and still answers.
    await vi.waitFor(async () => expect(textOf(await pool.call({ tool: 'cancellations', arguments: {} }))).toBe('1'), WAIT);
  });

  it('passes every progress notification of a pooled call on, in order', async () => {
    const pool = track(new McpServerPool({ server: 'everything', launch: everything, instances: { min: 1, max: 1 } }, tools));
    await pool.start();
    const progress: { progress: number; total: number | undefined }[] = [];
    const result = await pool.call({ tool: 'trigger-long-running-operation', arguments: { duration: 0.5, steps: 5 }, onProgress: (p) => progress.push({ progress: p.progress, total: p.total }) });
    expect(textOf(result)).toContain('Long running operation completed');
    expect(progress).toEqual([1, 2, 3, 4, 5].map((n) => ({ progress: n, total: 5 })));
  });

  it('emits toolsChanged when server-everything announces the tool it adds after initialize', async () => {
    const pool = track(new McpServerPool({ server: 'everything', launch: everything, instances: { min: 1, max: 1 } }, tools));
    const changed = new Promise<void>((resolve) => pool.once('toolsChanged', resolve));
    await pool.start();
    await changed;
    expect((await pool.listTools()).tools.map((t) => t.name)).toContain('simulate-research-query');
  });

  it('calls a tool that server-everything runs only as a task as one, its status messages passed on as progress', async () => {
    const pool = track(new McpServerPool({ server: 'everything', launch: everything, instances: { min: 1, max: 1 } }, tools));
    const changed = new Promise<void>((resolve) => pool.once('toolsChanged', resolve));
    await pool.start();
    await changed;
    const listed = (await pool.listTools()).tools.find((t) => t.name === 'simulate-research-query');
    expect(listed?.execution?.taskSupport).toBe('required');
    // Called plainly, the server refuses it: this is why the fleet calls it as a task.
    const plain = await pool.call({ tool: 'simulate-research-query', arguments: { topic: 'tides' } });
    expect(plain.isError).toBe(true);
    expect(textOf(plain)).toContain('requires task augmentation');
    const messages: string[] = [];
    const result = await pool.call({ tool: 'simulate-research-query', arguments: { topic: 'tides' }, asTask: true, onProgress: (p) => messages.push(p.message ?? '') });
    expect(result.isError).not.toBe(true);
    expect(textOf(result)).toContain('# Research Report: tides');
    // Its stages as the server names them, each once and in order; the task's status is read about once a second,
    // as long as a stage lasts, so a stage may be missed on a busy machine, but not all of them.
    const stages = ['Gathering sources...', 'Analyzing content...', 'Synthesizing findings...', 'Generating report...'];
    expect(messages.length).toBeGreaterThan(0);
    expect(messages).toEqual(stages.filter((stage) => messages.includes(stage)));
  });

  it('cancels the task itself (tasks/cancel), not only the wait, when a task call is aborted or times out', async () => {
    const client = new Client({ name: 'task-test', version: '1' });
    await client.connect(new StdioClientTransport({ ...everything, stderr: 'ignore' }));
    track(client);
    await vi.waitFor(async () => expect((await client.listTools()).tools.map((t) => t.name)).toContain('simulate-research-query'), WAIT);
    const statuses = async (): Promise<string[]> => ((await client.request({ method: 'tasks/list', params: {} }, TASK_LIST)).tasks as { status: string }[]).map((t) => t.status);
    const controller = new AbortController();
    const aborted = callAsTask(client, { name: 'simulate-research-query', arguments: { topic: 'reefs' } }, { timeoutMs: 30_000, signal: controller.signal, onStatus: () => controller.abort(new Error('the agent gave up')) });
    await expect(aborted).rejects.toThrow();
    // The server's own list of its tasks says the task was cancelled, not left running.
    await vi.waitFor(async () => expect(await statuses()).toEqual(['cancelled']), WAIT);
    await expect(callAsTask(client, { name: 'simulate-research-query', arguments: { topic: 'shoals' } }, { timeoutMs: 300 })).rejects.toThrow(/timed out/i);
    await vi.waitFor(async () => expect(await statuses()).toEqual(['cancelled', 'cancelled']), WAIT);
  });

  it('ends an aborted task call of the pool CANCELLED, and the instance serves on', async () => {
    const pool = track(new McpServerPool({ server: 'everything', launch: everything, instances: { min: 1, max: 1 } }, tools));
    const changed = new Promise<void>((resolve) => pool.once('toolsChanged', resolve));
    await pool.start();
    await changed;
    const controller = new AbortController();
    const call = pool.call({ tool: 'simulate-research-query', arguments: { topic: 'reefs' }, asTask: true, signal: controller.signal, onProgress: () => controller.abort(new Error('the agent gave up')) });
    const failure = await failureOf(call);
    expect(failure.code).toBe('CANCELLED');
    expect(failure.message).toContain('the agent gave up');
    expect(textOf(await pool.call({ tool: 'echo', arguments: { message: 'still here' } }))).toBe('Echo: still here');
  });

  it('stops following a tools/list whose pages never end, lead back to a page already read, or hold too many tools or bytes, and the instance serves on', async () => {
    for (const [flag, said] of [
      ['--endless-list', /more than 1000 pages/],
      ['--cycling-list', /cursor "1" again/],
      ['--many-tools', /more than 10000 tools/],
      ['--bulky-list', /more than 32 MiB of JSON/],
      ['--huge-list', /one page of its tools\/list takes (more than )?\d+ bytes, over the \d+ one message of a server may be: it must page its list/],
    ] as const) {
      const pool = track(new McpServerPool({ server: 'pager', launch: { command: process.execPath, args: [PROBE_SERVER, flag] }, instances: { min: 1, max: 1 } }, tools));
      await pool.start();
      const failure = await failureOf(pool.listTools());
      expect(failure.code).toBe('EXECUTION_FAILED');
      expect(failure.message).toMatch(said);
      expect(failure.message).toContain("MCP server 'pager'");
      expect(textOf(await pool.call({ tool: 'pid', arguments: {} }))).toBe(String(pidsOf(pool)[0]));
    }
  });

  it('emits toolsChanged once for a stdio server that adds a tool, and lists the new tool', async () => {
    const pool = track(new McpServerPool({ server: 'probe', launch: probeServer, instances: { min: 1, max: 1 } }, tools));
    await pool.start();
    expect((await pool.listTools()).tools.map((t) => t.name)).not.toContain('added-1');
    let changes = 0;
    pool.on('toolsChanged', () => (changes += 1));
    const changed = new Promise<void>((resolve) => pool.once('toolsChanged', resolve));
    expect(textOf(await pool.call({ tool: 'add-tool', arguments: {} }))).toBe('added-1');
    await changed;
    expect((await pool.listTools()).tools.map((t) => t.name)).toContain('added-1');
    expect(textOf(await pool.call({ tool: 'added-1', arguments: {} }))).toBe('added-1');
    expect(changes).toBe(1);
  });

  it('emits toolsChanged when an instance comes up after the tools were listed: one replacing an instance that stopped answering, a new caller\'s session', async () => {
    const shared = track(new McpServerPool({ server: 'probe', launch: probeServer, instances: { min: 1, max: 1 }, pingTimeoutMs: 200, restart: { initialDelayMs: 10 } }, tools));
    await shared.start();
    await shared.listTools();
    let replaced = 0;
    shared.on('toolsChanged', () => (replaced += 1));
    const frozen = pidsOf(shared)[0];
    await expect(shared.call({ tool: 'freeze', arguments: {}, timeoutMs: 200 })).rejects.toMatchObject({ code: 'EXECUTION_TIMEOUT' });
    await vi.waitFor(() => expect(pidsOf(shared).filter((pid) => pid !== frozen)).toHaveLength(1), WAIT);
    await vi.waitFor(() => expect(replaced).toBe(1), WAIT);

    const perCaller = track(new McpServerPool({ server: 'probe', launch: probeServer, session: 'perCaller', instances: { min: 0, max: 2 } }, tools));
    await perCaller.start();
    // The listing starts the first instance and reads it; alice then takes it as her session.
    await perCaller.listTools();
    let sessions = 0;
    perCaller.on('toolsChanged', () => (sessions += 1));
    const alice = textOf(await perCaller.call({ tool: 'pid', arguments: {}, caller: 'alice' }));
    const bob = textOf(await perCaller.call({ tool: 'pid', arguments: {}, caller: 'bob' }));
    expect(bob).not.toBe(alice);
    await vi.waitFor(() => expect(sessions).toBe(1), WAIT);
  });

  it('takes with it, when closed or abandoned, a process the server started in a session of its own', async () => {
    const launch = { command: process.execPath, args: [LEAVER], env: { PATH: process.env.PATH ?? '' }, startupTimeoutMs: 20_000 };
    for (const end of ['close', 'abandon'] as const) {
      const instance = track(await McpInstance.start({ server: 'leaver', launch, tools }));
      const sleep = Number(textOf(await instance.callTool('spawn-sleep', {}, { timeoutMs: 10_000 })));
      const escaped = processTable().find((p) => p.pid === sleep);
      // Out of the server's group, which the group kill alone would leave running under PID 1.
      expect(escaped).toMatchObject({ ppid: instance.pid, comm: 'sleep' });
      expect(escaped?.pgrp).not.toBe(instance.pid);
      if (end === 'close') await instance.close();
      else instance.abandon();
      await vi.waitFor(() => expect(processTable().filter((p) => p.pid === sleep && p.start === escaped?.start && p.state !== 'Z')).toEqual([]), WAIT);
    }
  });

  it('leaves no process behind after close()', async () => {
    const pool = new McpServerPool({ server: 'everything', launch: everything, instances: { min: 2, max: 2 } }, tools);
    await pool.start();
    const pids = pidsOf(pool);
    expect(processesInGroups(pids)).toHaveLength(2);
    await pool.close();
    expect(processesInGroups(pids)).toEqual([]);
    await expect(pool.call({ tool: 'echo', arguments: { message: 'late' } })).rejects.toMatchObject({ code: 'UNAVAILABLE' });
  });

  it('leaves no server process behind when its worker is killed with SIGKILL', async () => {
    const { child, firstLine, exited } = await startPoolChild(POOL_CHILD, ROOT);
    try {
      const pids = JSON.parse(firstLine) as number[];
      expect(pids).toHaveLength(2);
      expect(processesInGroups(pids)).toHaveLength(2);
      child.kill('SIGKILL');
      await exited;
      await vi.waitFor(() => expect(processesInGroups(pids)).toEqual([]), WAIT);
    } finally {
      child.kill('SIGKILL');
      await exited;
    }
  });
});

describe('what a server sends back keeps its secrets out', () => {
  const secret = 'sk-probe-secret-2';
  const launch = { ...probeServer, env: { PROBE_SECRET: secret }, secrets: [secret] };

  it('replaces its secret values in results, structured content, errors and progress messages', async () => {
    const pool = track(new McpServerPool({ server: 'probe', launch, instances: { min: 1, max: 1 } }, tools));
    await pool.start();
    const echoed = await pool.call({ tool: 'echo-secret', arguments: {} });
    expect(textOf(echoed)).toBe('the token is [redacted]');
    expect(echoed.structuredContent).toEqual({ token: '[redacted]', 'key-[redacted]': 1 });
    const failure = await failureOf(pool.call({ tool: 'fail-with-secret', arguments: {}, label: 'probe.fail-with-secret' }));
    expect(failure.code).toBe('EXECUTION_FAILED');
    expect(failure.message).toContain('cannot log in with [redacted]');
    expect(JSON.stringify(failure)).not.toContain(secret);
    expect(String((failure as { cause?: unknown }).cause)).not.toContain(secret);
    const messages: string[] = [];
    expect(textOf(await pool.call({ tool: 'progress-secret', arguments: {}, onProgress: (p) => messages.push(p.message ?? '') }))).toBe('reported');
    expect(messages).toEqual(['using [redacted]']);
  });

  it("replaces a secret with quotes and backslashes in a real server's JSON print of its environment (server-everything's get-env)", async () => {
    const token = 'Tok"with\\back/slash+=-é';
    const pool = track(new McpServerPool({ server: 'everything', launch: { ...everything, env: { UPSTREAM_TOKEN: token }, secrets: [token], startupTimeoutMs: 20_000 }, instances: { min: 1, max: 1 } }, tools));
    await pool.start();
    const printed = textOf(await pool.call({ tool: 'get-env', arguments: {} }));
    expect(JSON.parse(printed)).toEqual({ UPSTREAM_TOKEN: '[redacted]' });
  });
});

describe("a server's end is its process's end", () => {
  it('ends the instance when its process exits, though a helper it left in a session of its own still holds its stdio; the call ends MCP_SERVER_LOST and the helper is killed', async () => {
    const pool = track(new McpServerPool({ server: 'probe', launch: probeServer, instances: { min: 1, max: 1 }, restart: { initialDelayMs: 10 } }, tools));
    await pool.start();
    const [first] = pidsOf(pool);
    const pidFile = join(mkdtempSync(join(tmpdir(), 'mcp-daemon-')), 'pid');
    const started = Date.now();
    const failure = await failureOf(pool.call({ tool: 'daemon-then-exit', arguments: { pidFile }, timeoutMs: 30_000 }));
    const helper = Number(readFileSync(pidFile, 'utf8'));
    try {
      expect(failure.code).toBe('MCP_SERVER_LOST');
      // Long before the call's own timeout: the instance ended with its process.
      expect(Date.now() - started).toBeLessThan(20_000);
      await vi.waitFor(() => expect(processTable().some((p) => p.pid === helper && p.state !== 'Z')).toBe(false), WAIT);
      // A replacement serves.
      await vi.waitFor(() => expect(pidsOf(pool).filter((pid) => pid !== first)).toHaveLength(1), WAIT);
      expect(textOf(await pool.call({ tool: 'pid', arguments: {} }))).not.toBe(String(first));
    } finally {
      try {
        process.kill(helper, 'SIGKILL');
      } catch {
        // Gone, as it should be.
      }
    }
  });

  it("tells an instance's death with the last 4 KiB of its stderr, not only the last thousand characters", async () => {
    const pool = track(new McpServerPool({ server: 'probe', launch: probeServer, instances: { min: 1, max: 1 }, restart: { initialDelayMs: 10 } }, tools));
    const deaths: string[] = [];
    pool.on('instanceExited', (exit) => deaths.push(exit.detail));
    await pool.start();
    expect((await failureOf(pool.call({ tool: 'stderr-then-exit', arguments: {} }))).code).toBe('MCP_SERVER_LOST');
    await vi.waitFor(() => expect(deaths).toHaveLength(1), WAIT);
    // 30 lines of 100 characters: all of them fit in 4 KiB.
    expect(deaths[0]).toContain('line 01 ');
    expect(deaths[0]).toContain('line 30 ');
  });
});

describe('a tools/list with entries that are no MCP tool', () => {
  it('serves the tools that are, and names each one that is not with what is wrong', async () => {
    const pool = track(new McpServerPool({ server: 'mixed', launch: { command: process.execPath, args: [PROBE_SERVER, '--bad-tools'] }, instances: { min: 1, max: 1 } }, tools));
    await pool.start();
    const listing = await pool.listTools();
    expect(listing.tools.map((t) => t.name)).toContain('pid');
    expect(listing.refused).toEqual([
      { tool: 'string-input', reason: expect.stringContaining('its inputSchema is not an object schema') as string },
      { tool: 'untyped-input', reason: expect.stringContaining('its inputSchema is not an object schema') as string },
      { tool: 'array-output', reason: expect.stringContaining('its outputSchema is not an object schema') as string },
      { tool: 'worded-hint', reason: expect.stringContaining('annotations.readOnlyHint') as string },
      { tool: '(an entry whose name is 42)', reason: expect.stringContaining('name') as string },
    ]);
  });
});


describe('sessions, idle reaping and start failures (QA3)', () => {
  const IDLE_MS = 800;

  /** Runs the pool's `wait` tool (it ends only when cancelled) and resolves once the server runs it. */
  async function holdOne(pool: McpServerPool, caller?: string): Promise<AbortController> {
    const controller = new AbortController();
    let started!: () => void;
    const running = new Promise<void>((resolve) => (started = resolve));
    pool.call({ tool: 'wait', arguments: {}, signal: controller.signal, onProgress: () => started(), ...(caller === undefined ? {} : { caller }) }).catch(() => undefined);
    await running;
    return controller;
  }

  /**
   * Lists the pool's tools back to back (as a worker re-imports its catalog) until the instance of `pid` has exited, or
   * four times its idle time has passed; gives how long after `since` it exited (Infinity when it did not).
   */
  async function listUntilGone(pool: McpServerPool, pid: string, since: number): Promise<number> {
    let exitedAt: number | undefined;
    pool.on('instanceExited', (exit) => {
      if (String(exit.pid) === pid) exitedAt = Date.now();
    });
    while (exitedAt === undefined && Date.now() - since < 4 * IDLE_MS) await pool.listTools();
    return (exitedAt ?? Number.POSITIVE_INFINITY) - since;
  }

  it("reaps a perCaller caller's instance idleMs after its last call, however often it is listed meanwhile, and the caller waiting for an instance gets one then", async () => {
    const pool = track(new McpServerPool({ server: 'probe', launch: probeServer, session: 'perCaller', instances: { min: 0, max: 2, callsPerInstance: 1, idleMs: IDLE_MS } }, tools));
    await pool.start();
    const pidOf = async (caller: string): Promise<string> => textOf(await pool.call({ tool: 'pid', arguments: {}, caller }));
    const carol = await pidOf('carol');
    // Bob keeps the other instance busy, so every listing reads carol's, which is idle.
    const bob = await holdOne(pool, 'bob');
    expect(await pidOf('carol')).toBe(carol);
    const lastCall = Date.now();
    const alice = pidOf('alice');
    // Handled now, awaited below: a test that fails before then must not leave it rejecting unhandled at close.
    alice.catch(() => undefined);
    expect(pool.status().waiting).toBe(1);
    const reapedAfter = await listUntilGone(pool, carol, lastCall);
    expect(reapedAfter).toBeGreaterThanOrEqual(IDLE_MS - 50);
    expect(reapedAfter).toBeLessThan(IDLE_MS + 600);
    expect(await alice).not.toBe(carol);
    bob.abort();
  });

  it('reaps a shared instance above min idleMs after its last call, however often it is listed meanwhile', async () => {
    const pool = track(new McpServerPool({ server: 'probe', launch: probeServer, instances: { min: 1, max: 2, callsPerInstance: 1, idleMs: IDLE_MS } }, tools));
    await pool.start();
    const held = await holdOne(pool);
    // The first instance is busy: this call starts a second one, above min, which every listing then reads.
    const second = textOf(await pool.call({ tool: 'pid', arguments: {} }));
    const lastCall = Date.now();
    expect(pidsOf(pool).map(String)).toContain(second);
    const reapedAfter = await listUntilGone(pool, second, lastCall);
    expect(reapedAfter).toBeGreaterThanOrEqual(IDLE_MS - 50);
    expect(reapedAfter).toBeLessThan(IDLE_MS + 600);
    expect(pidsOf(pool).map(String)).not.toContain(second);
    held.abort();
  });

  /** A call of `tool` through the executor a worker's catalog would hold for it, as `caller`. */
  function runAs(pool: McpServerPool, tool: string, caller: string | undefined): Promise<ToolResult> {
    const executor = new McpToolExecutor(`probe.${tool}`, { server: 'probe', tool, timeoutMs: undefined }, pool, pino({ level: 'silent' }), caller);
    const call = { id: `c-${tool}`, name: `probe.${tool}`, arguments: {} };
    return executor.execute(call, { call, signal: new AbortController().signal, tier: 'host', attempt: 1, env: {}, trust: 'trusted', progress: () => undefined });
  }

  it("tells a perCaller caller whose instance died that its session ended, and its next call starts a new one; a shared server's caller is told nothing of sessions", async () => {
    const pool = track(new McpServerPool({ server: 'probe', launch: probeServer, session: 'perCaller', instances: { min: 0, max: 2 }, restart: { initialDelayMs: 10 } }, tools));
    await pool.start();
    const before = (await runAs(pool, 'pid', 'alice')).content;
    const lost = await failureOf(runAs(pool, 'stderr-then-exit', 'alice'));
    expect(lost).toMatchObject({ code: 'MCP_SERVER_LOST', details: { server: 'probe', instance: `pid ${before}`, session: 'ended' } });
    expect(lost.message).toContain("your session on MCP server 'probe' ended with it");
    expect(lost.message).toContain('your next call starts a new session');
    // The server's stderr stays the operator's.
    expect(lost.message).not.toContain('line 01');
    expect((await runAs(pool, 'pid', 'alice')).content).not.toBe(before);

    const shared = track(new McpServerPool({ server: 'probe', launch: probeServer, instances: { min: 1, max: 1 }, restart: { initialDelayMs: 10 } }, tools));
    await shared.start();
    const told = await failureOf(runAs(shared, 'stderr-then-exit', 'alice'));
    expect(told.code).toBe('MCP_SERVER_LOST');
    expect(told.details).not.toHaveProperty('session');
    expect(told.message).not.toContain('session');
  });

  it('says how a server that ends before answering initialize ended, with the last lines of its stderr redacted', async () => {
    const secret = 'sk-start-secret-3';
    const exits = { command: process.execPath, args: ['-e', 'console.error("cannot read config.toml; token " + process.env.TOKEN); process.exit(3)'], env: { TOKEN: secret }, secrets: [secret], startupTimeoutMs: 10_000 };
    const exited = await failureOf(McpInstance.start({ server: 'broken', launch: exits, tools }));
    expect(exited.code).toBe('UNAVAILABLE');
    expect(exited.message).toContain('its process exited with status 3 before answering initialize; its stderr: cannot read config.toml; token [redacted]');
    expect(exited.message).not.toContain(secret);
    const killed = { command: process.execPath, args: ['-e', 'process.kill(process.pid, "SIGTERM"); setTimeout(() => {}, 10_000)'], env: {}, startupTimeoutMs: 10_000 };
    expect((await failureOf(McpInstance.start({ server: 'broken', launch: killed, tools }))).message).toContain('its process was killed by signal SIGTERM before answering initialize');
  });

  it("says what went wrong with a server's handshake or listing as such, in one line, without a tool caller's advice", async () => {
    const launch = (mode: string) => ({ command: process.execPath, args: [ODD_SERVER], env: { MODE: mode }, startupTimeoutMs: 10_000 });
    const handshake = await failureOf(McpInstance.start({ server: 'odd', launch: launch('nocaps'), tools }));
    expect(handshake.message).toContain('its answer to initialize is not one MCP allows: ');
    expect(handshake.message).toContain('at capabilities');
    for (const [mode, said] of [
      ['badlist', /^tool 'tools\/list' failed: MCP server 'odd' cannot be listed: a page of its tools\/list is not one: .* at tools$/],
      ['silent', /MCP server 'odd' cannot be listed: its tools\/list did not arrive within 1500 ms, the bound on one whole listing$/],
      ['exit', /MCP server 'odd' cannot be listed: its instance \(pid \d+\) ended while it listed its tools$/],
      ['list-error', /MCP server 'odd' cannot be listed: it answered tools\/list with an error: .*list exploded second line$/],
    ] as const) {
      const pool = track(new McpServerPool({ server: 'odd', launch: launch(mode), instances: { min: 1, max: 1 }, callTimeoutMs: 1500 }, tools));
      await pool.start();
      const failure = await failureOf(pool.listTools());
      expect(failure.message).toMatch(said);
      // No schema dump over many lines, and no advice meant for a tool's caller.
      expect(failure.message).not.toMatch(/\n|timeoutMs|honour|took effect|refused the call/);
    }
  });

  it("logs a server's failure to be listed once, however often its instances come up and fail it the same way", async () => {
    const lines: { msg: string; server?: string; err?: string }[] = [];
    const log = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line) as { msg: string }) });
    const transport = { kind: 'stdio' as const, command: process.execPath, args: [ODD_SERVER], cwd: undefined, env: { MODE: 'list-error' } };
    const config = serverConfig('listerr', transport, { instances: { min: 2, max: 2 }, restartBackoff: { initialMs: 60_000, maxMs: 60_000 } });
    const servers = track(new WorkerServers({ servers: [config], tier: 'host', pool: undefined, launchTools: tools, sandbox: false, log }));
    await servers.start();
    await servers.whenSettled();
    expect(servers.status()[0]).toMatchObject({ state: 'down', error: "MCP server 'listerr' cannot be listed: it answered tools/list with an error: MCP error -32603: list exploded second line" });
    // Both instances came up, each a reason to list again: the same failure, told once.
    await vi.waitFor(() => expect(lines.filter((l) => l.msg === 'MCP server instance started')).toHaveLength(2), WAIT);
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(lines.filter((l) => l.server === 'listerr' && l.msg.startsWith('MCP server could not be'))).toHaveLength(1);
  });

  it('reads an answer behind a byte-order mark, and reports the lines of its stdout it cannot take, redacted and bounded, reading on', async () => {
    const secret = 'sk-stdout-secret-9';
    const pool = track(new McpServerPool({ server: 'noisy', launch: { command: process.execPath, args: [ODD_SERVER], env: { TOKEN: secret }, secrets: [secret] }, instances: { min: 1, max: 1 } }, tools));
    const told: string[] = [];
    pool.on('unreadable', ({ text }) => told.push(text));
    await pool.start();
    expect(textOf(await pool.call({ tool: 'say', arguments: { mode: 'bom' } }))).toBe('behind a BOM');
    expect(told).toEqual([]);
    expect(textOf(await pool.call({ tool: 'say', arguments: { mode: 'noise' } }))).toBe('after the noise');
    // Ten lines a window are told, the rest counted when the next is told.
    await vi.waitFor(() => expect(told).toHaveLength(10), WAIT);
    expect(told[0]).toMatch(/^a line of its stdout is not JSON/);
    expect(told[1]).toMatch(/^it answered a request it was not sent/);
    // No line is quoted: JSON.parse's message would show a line's first characters, the start of a secret.
    expect(told.join('\n')).not.toContain(secret.slice(0, 6));
  });

  it("shows a server that ends at start in /readyz and the log by how it ended, without a caller's advice, and logs its first failure once", async () => {
    const lines: { msg: string; server?: string; err?: string }[] = [];
    const log = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line) as { msg: string }) });
    const exits = { kind: 'stdio' as const, command: process.execPath, args: ['-e', 'console.error("no config here"); process.exit(1)'], cwd: undefined, env: {} };
    const config = (name: string, failures: number): McpServerConfig =>
      serverConfig(name, exits, {
        callsPerInstance: 1,
        startupTimeoutMs: 10_000,
        // `once` is not tried again during the test; `looping` is, until its crash loop stops it.
        restartBackoff: failures === 1 ? { initialMs: 60_000, maxMs: 60_000 } : { initialMs: 10, maxMs: 10 },
        crashLoop: { failures: Math.max(2, failures), windowMs: 60_000 },
      });
    const servers = track(new WorkerServers({ servers: [config('once', 1), config('looping', 3)], tier: 'host', pool: undefined, launchTools: tools, sandbox: false, log }));
    await servers.start();
    await vi.waitFor(() => expect(servers.status().find((s) => s.name === 'looping')?.state).toBe('stopped'), WAIT);
    const [once, looping] = servers.status();
    expect(once).toMatchObject({ state: 'down', error: expect.stringContaining("MCP server 'once'") as string });
    expect(once?.error).toContain('its process exited with status 1 before answering initialize; its stderr: no config here');
    expect(looping?.error).toContain('it failed 3 times within 60000 ms and is not restarted again for now; last: its process exited with status 1 before answering initialize');
    for (const error of [once?.error, looping?.error]) expect(error).not.toMatch(/send the request again/);
    const failures = lines.filter((l) => l.server === 'once' && l.msg.startsWith('MCP server could not be started'));
    expect(failures).toHaveLength(1);
    expect(failures[0]?.err).toContain('exited with status 1');
    expect(failures[0]?.err).not.toMatch(/send the request again/);
  });
});
