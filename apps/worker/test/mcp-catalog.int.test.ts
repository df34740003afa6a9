import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { Tool } from '@forge-fleet/shared';
import { pino } from 'pino';
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { findLaunchTools, type LaunchTools } from '../src/mcp-servers/launch-command.js';
import { McpToolExecutor } from '../src/mcp-servers/mcp-tool-executor.js';
import { SecretValue } from '../src/mcp-servers/secret-value.js';
import type { McpServerConfig } from '../src/mcp-servers/servers-file.js';
import { WorkerServers } from '../src/mcp-servers/worker-servers.js';
import { probeIsolation } from '../src/sandbox/probe.js';
import { serverConfig } from './fixtures/server-config.js';
import { closeTracked, track } from './fixtures/tracked.js';

// The catalog follows the server (docs/mcp-servers.md) through every instance that comes up after the first
// listing: a replacement lists what its server lists now, not what the instance it replaced had come to list.

const PROBE_SERVER = fileURLToPath(new URL('./fixtures/mcp-probe-server.mjs', import.meta.url));
const UPSTREAM = fileURLToPath(new URL('./fixtures/mcp-http-upstream.mjs', import.meta.url));
const TOKEN = 'tok-catalog-follows-upstream';
/** Bounded waits for what the worker does in the background. */
const WAIT = { timeout: 15_000, interval: 20 };

let launchTools: LaunchTools;

beforeAll(() => {
  launchTools = findLaunchTools(probeIsolation(), process.env.PATH ?? '');
});

afterEach(closeTracked);


const probe = (o: { min: number; max: number; callsPerInstance?: number }, ...flags: string[]): McpServerConfig =>
  serverConfig('probe', { kind: 'stdio', command: process.execPath, args: [PROBE_SERVER, ...flags], cwd: undefined, env: {} }, { instances: { min: o.min, max: o.max }, callsPerInstance: o.callsPerInstance ?? 8 });

/** Runs the worker's servers for `config`, started, with a count of the changes they told since. */
async function serve(config: McpServerConfig): Promise<{ servers: WorkerServers; changes: () => number }> {
  const servers = track(new WorkerServers({ servers: [config], tier: 'host', pool: undefined, launchTools, sandbox: false, log: pino({ level: 'silent' }) }));
  await servers.start();
  // start() waits for the first start only so long (STARTUP_HEAD_START_MS); these tests read the server's first listing.
  await servers.whenSettled();
  let changes = 0;
  servers.on('toolsChanged', () => (changes += 1));
  return { servers, changes: () => changes };
}

const namesOf = (servers: WorkerServers): string[] => servers.tools().map((t) => t.definition.name);

/** Calls a tool the worker serves, through the executor its catalog entry holds, and gives its text. */
async function run(servers: WorkerServers, name: string, args: Record<string, unknown> = {}, o: { signal?: AbortSignal; onProgress?: () => void } = {}): Promise<string> {
  const tool: Tool | undefined = servers.tools().find((t) => t.definition.name === name);
  if (tool?.executor === undefined) throw new Error(`the worker serves no tool ${name}: it serves ${namesOf(servers).join(', ')}`);
  const call = { id: `c-${name}`, name, arguments: args };
  const ctx = { call, signal: o.signal ?? new AbortController().signal, tier: 'host' as const, attempt: 1, env: {}, trust: 'trusted' as const, progress: () => o.onProgress?.() };
  const result = await tool.executor.execute(call, ctx);
  if (result.isError) throw new Error(`${name} failed: ${result.content}`);
  return result.content;
}

/** The HTTP upstream fixture (one McpServer per session), on a free port; `close` SIGKILLs it. */
async function startUpstream(): Promise<{ url: string; close(): Promise<void> }> {
  const child: ChildProcess = spawn(process.execPath, [UPSTREAM, TOKEN, '0'], { stdio: ['ignore', 'pipe', 'ignore'] });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const port = await new Promise<number>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`the upstream exited (${code}) before listening`)));
    if (child.stdout === null) throw new Error('no stdout');
    createInterface({ input: child.stdout }).on('line', (line) => {
      const event = JSON.parse(line) as { event: string; port?: number };
      if (event.event === 'listening' && event.port !== undefined) resolve(event.port);
    });
  });
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    close: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}

describe('the tools a worker serves follow each instance of a server that comes up', () => {
  it('lists a stdio server again when a killed instance is replaced: what the dead one added leaves, what it removed comes back', async () => {
    const { servers } = await serve(probe({ min: 1, max: 1 }));
    expect(namesOf(servers)).toContain('probe.removable');
    expect(await run(servers, 'probe.add-tool')).toBe('added-1');
    expect(await run(servers, 'probe.remove-tool')).toBe('removed removable');
    // The list change the server announced is followed.
    await vi.waitFor(() => {
      expect(namesOf(servers)).toContain('probe.added-1');
      expect(namesOf(servers)).not.toContain('probe.removable');
    }, WAIT);
    const killed = Number(await run(servers, 'probe.pid'));
    process.kill(killed, 'SIGKILL');
    // The replacement lists the server's original tools: the catalog takes them, though no list_changed was sent.
    await vi.waitFor(() => {
      expect(namesOf(servers)).toContain('probe.removable');
      expect(namesOf(servers)).not.toContain('probe.added-1');
    }, WAIT);
    expect(Number(await run(servers, 'probe.pid'))).not.toBe(killed);
    expect(await run(servers, 'probe.removable')).toBe('removable');
  });

  it('lists a new instance of a server scaling up, and an unchanged list tells no change', async () => {
    const { servers, changes } = await serve(probe({ min: 1, max: 2, callsPerInstance: 1 }));
    // The first instance's one slot is taken by a call that runs until it is cancelled.
    const hold = new AbortController();
    let holding!: () => void;
    const held = new Promise<void>((resolve) => (holding = resolve));
    const waiting = run(servers, 'probe.wait', {}, { signal: hold.signal, onProgress: () => holding() }).catch(() => 'ended');
    try {
      await held;
      const first = servers.status()[0];
      expect(first?.instances).toBe(1);
      // A second call makes the pool start a second instance, which then serves every call (the first is busy).
      await vi.waitFor(async () => expect(Number(await run(servers, 'probe.listings'))).toBeGreaterThan(0), WAIT);
      expect(servers.status()[0]?.instances).toBe(2);
      // Its list is the one served: no change is told. A change it then announces is followed, after that listing.
      expect(await run(servers, 'probe.add-tool')).toBe('added-1');
      await vi.waitFor(() => expect(namesOf(servers)).toContain('probe.added-1'), WAIT);
      expect(changes()).toBe(1);
    } finally {
      hold.abort(new Error('the test is over'));
      await waiting;
    }
  });

  it('lists an HTTP upstream again when its session is lost and a new one replaces it', async () => {
    const upstream = track(await startUpstream());
    const headers = { Authorization: new SecretValue(`Bearer ${TOKEN}`, 'environment variable UPSTREAM_TOKEN') };
    const { servers } = await serve(serverConfig('up', { kind: 'http', url: upstream.url, headers }));
    expect(await run(servers, 'up.add-tools', { count: 1 })).toBe('added-1');
    await vi.waitFor(() => expect(namesOf(servers)).toContain('up.added-1'), WAIT);
    const before = await run(servers, 'up.session');
    expect(await run(servers, 'up.forget-session')).toBe('forgotten');
    // The next call finds the session gone (a 404: it did not run) and is sent again on the new one the pool opens,
    // with the upstream's original list.
    expect(await run(servers, 'up.echo', { message: 'x' })).toBe('Echo: x');
    await vi.waitFor(() => expect(namesOf(servers)).not.toContain('up.added-1'), WAIT);
    expect(await run(servers, 'up.session')).not.toBe(before);
  });
});

describe('what the worker serves of a list', () => {
  it('is down, saying why, when the server lists no tools; its instance serves on', async () => {
    const { servers } = await serve(probe({ min: 1, max: 1 }, '--no-tools'));
    expect(servers.status()[0]).toMatchObject({ state: 'down', error: 'it lists no tools' });
    expect(namesOf(servers)).toEqual([]);
    expect(servers.status()[0]?.instances).toBe(1);
  });

  it('serves the tools of a list that also holds entries that are no MCP tool, naming each left out', async () => {
    const { servers } = await serve(probe({ min: 1, max: 1 }, '--bad-tools'));
    expect(servers.status()[0]).toMatchObject({ state: 'up' });
    expect(namesOf(servers)).toContain('probe.pid');
    expect(await run(servers, 'probe.pid')).toMatch(/^\d+$/);
    expect(servers.status()[0]?.skipped?.map((s) => s.tool)).toEqual(expect.arrayContaining(['string-input', 'untyped-input', 'array-output', 'worded-hint', '(an entry whose name is 42)']));
  });

  it('follows a tool that comes to require tasks, though its definition stays the same', async () => {
    const { servers, changes } = await serve(probe({ min: 1, max: 1 }));
    const asTask = (): boolean | undefined => {
      const executor = servers.tools().find((t) => t.definition.name === 'probe.removable')?.executor;
      return executor instanceof McpToolExecutor ? executor.asTask : undefined;
    };
    expect(asTask()).toBe(false);
    expect(await run(servers, 'probe.require-task')).toBe('removable requires a task');
    await vi.waitFor(() => expect(asTask()).toBe(true), WAIT);
    expect(changes()).toBe(1);
  });
});

