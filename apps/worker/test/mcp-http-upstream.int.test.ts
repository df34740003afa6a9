import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { inspect } from 'node:util';
import { isFleetError } from '@forge-fleet/shared';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { startTellingProcess } from './fixtures/told-process.js';
import { findLaunchTools, type LaunchTools } from '../src/mcp-servers/launch-command.js';
import { SecretValue } from '../src/mcp-servers/secret-value.js';
import { McpServerPool } from '../src/mcp-servers/server-pool.js';
import { probeIsolation } from '../src/sandbox/probe.js';
import { closeTracked, track } from './fixtures/tracked.js';

const UPSTREAM = fileURLToPath(new URL('./fixtures/mcp-http-upstream.mjs', import.meta.url));
/** The upstream's token: long and distinctive, so that finding it anywhere is certain. */
const TOKEN = 'tok-5d1f0c9e7a2b4c68b3e1-upstream-secret';
const WRONG = 'tok-wrong-8c4e2a7f1b9d-not-the-secret';
/** Bounded waits for what the pool does in the background. */
const WAIT = { timeout: 15_000, interval: 20 };

let tools: LaunchTools;

/** One run of the upstream fixture, with what it printed. */
interface Upstream {
  readonly port: number;
  readonly url: string;
  readonly events: readonly { event: string; id?: string }[];
  /** SIGKILLs it and waits until it is gone. */
  kill(): Promise<void>;
  close(): Promise<void>;
}

async function startUpstream(port = 0): Promise<Upstream> {
  const upstream = await startTellingProcess<{ event: string; id?: string; port?: number }>([UPSTREAM, TOKEN, String(port)]);
  return { port: upstream.port, url: `http://127.0.0.1:${upstream.port}/mcp`, events: upstream.told, kill: upstream.kill, close: upstream.kill };
}

/** A port nothing listens on (taken, then released). */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

const bearer = (token: string): SecretValue => new SecretValue(`Bearer ${token}`, 'environment variable UPSTREAM_TOKEN');

function textOf(result: CallToolResult): string {
  return result.content.map((block) => (block.type === 'text' ? block.text : '')).join('');
}

/** The error a promise rejects with. */
async function rejectionOf(promise: Promise<unknown>): Promise<Error> {
  const err: unknown = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!isFleetError(err)) throw new Error(`expected a FleetError, got ${String(err)}`);
  return err;
}

/** Everything an error can say: message, stack, details and its causes, as a logger would print them. */
function everythingSaid(value: unknown): string {
  const parts = [inspect(value, { depth: 20 }), JSON.stringify(value)];
  for (let e: unknown = value; e instanceof Error; e = e.cause) parts.push(e.message, e.stack ?? '', JSON.stringify(e));
  return parts.join('\n');
}

beforeAll(() => {
  tools = findLaunchTools(probeIsolation(), process.env.PATH ?? '');
});

afterEach(closeTracked);

describe('a pool of sessions with a Streamable HTTP upstream', () => {
  it('calls tools with the Authorization header from a secret, and ends the session with a DELETE on close', async () => {
    const upstream = track(await startUpstream());
    const pool = new McpServerPool({ server: 'up', launch: { url: upstream.url, headers: { Authorization: bearer(TOKEN) } }, instances: { min: 1, max: 1 } }, tools);
    try {
      await pool.start();
      expect((await pool.listTools()).tools.map((t) => t.name)).toEqual(expect.arrayContaining(['echo', 'session', 'slow']));
      expect(textOf(await pool.call({ tool: 'echo', arguments: { message: 'hello' } }))).toBe('Echo: hello');
      const progress: number[] = [];
      expect(textOf(await pool.call({ tool: 'slow', arguments: { ms: 1, steps: 3 }, onProgress: (p) => progress.push(p.progress) }))).toBe('done');
      expect(progress).toEqual([0, 1, 2, 3]);
      const session = textOf(await pool.call({ tool: 'session', arguments: {} }));
      expect(pool.status().instances).toEqual([expect.objectContaining({ id: `session ${session.slice(0, 8)}… at ${upstream.url}`, pid: undefined })]);
      // The pool's options show where the secret came from, never its value.
      expect(inspect(pool.options, { depth: 20 })).not.toContain(TOKEN);
      await pool.close();
      expect(upstream.events).toContainEqual({ event: 'session-closed', id: session });
    } finally {
      await pool.close();
    }
  });

  it('sends notifications/cancelled for an aborted call', async () => {
    const upstream = track(await startUpstream());
    const pool = track(new McpServerPool({ server: 'up', launch: { url: upstream.url, headers: { Authorization: bearer(TOKEN) } }, instances: { min: 1, max: 1 } }, tools));
    await pool.start();
    const controller = new AbortController();
    const call = pool.call({ tool: 'slow', arguments: { ms: 60_000 }, signal: controller.signal, onProgress: () => controller.abort(new Error('the agent gave up')) });
    await expect(call).rejects.toMatchObject({ code: 'CANCELLED' });
    await vi.waitFor(async () => expect(textOf(await pool.call({ tool: 'cancellations', arguments: {} }))).toBe('1'), WAIT);
  });

  it('fails to start with UNAVAILABLE for a wrong or missing header, and the secret appears in no message or event', async () => {
    const upstream = track(await startUpstream());
    for (const headers of [{ Authorization: bearer(WRONG) }, {}]) {
      const said: unknown[] = [];
      const pool = track(
        new McpServerPool({ server: 'up', launch: { url: upstream.url, headers }, instances: { min: 1, max: 1 }, restart: { initialDelayMs: 1, maxDelayMs: 5, crashLoopFailures: 2 } }, tools),
      );
      for (const event of ['startFailed', 'stopped', 'instanceExited', 'instanceStarted'] as const) pool.on(event, (payload: unknown) => said.push(payload));
      const stopped = new Promise<void>((resolve) => pool.once('stopped', () => resolve()));
      const failure = await rejectionOf(pool.start());
      expect(failure).toMatchObject({ code: 'UNAVAILABLE' });
      expect(failure.message).toContain(`MCP server 'up' (${upstream.url})`);
      expect(failure.message).toContain('HTTP 401');
      await stopped;
      said.push(failure, pool.status().lastError, await rejectionOf(pool.call({ tool: 'echo', arguments: { message: 'x' } })));
      const text = said.map(everythingSaid).join('\n');
      // The fixture's 401 body quotes the header it was sent: none of it may come through.
      expect(text).toContain('401');
      expect(text).not.toContain(WRONG);
      expect(text).not.toContain(TOKEN);
    }
  });

  it('fails to start with UNAVAILABLE naming the server and URL when the upstream is down, and stops on a crash loop', async () => {
    const url = `http://127.0.0.1:${await freePort()}/mcp`;
    const pool = track(new McpServerPool({ server: 'down', launch: { url, headers: { Authorization: bearer(TOKEN) } }, instances: { min: 1, max: 1 }, restart: { initialDelayMs: 1, maxDelayMs: 5, crashLoopFailures: 3 } }, tools));
    const stopped = new Promise<void>((resolve) => pool.once('stopped', () => resolve()));
    const failure = await rejectionOf(pool.start());
    expect(failure).toMatchObject({ code: 'UNAVAILABLE' });
    expect(failure.message).toContain(`MCP server 'down' (${url})`);
    expect(failure.message).toContain('cannot be reached');
    await stopped;
    const late = await rejectionOf(pool.call({ tool: 'echo', arguments: { message: 'x' } }));
    expect(late).toMatchObject({ code: 'UNAVAILABLE' });
    expect(late.message).toContain('not restarted again');
    expect(everythingSaid(late)).not.toContain(TOKEN);
  });

  it('gives each perCaller caller a session of its own', async () => {
    const upstream = track(await startUpstream());
    const pool = track(new McpServerPool({ server: 'up', launch: { url: upstream.url, headers: { Authorization: bearer(TOKEN) } }, session: 'perCaller', instances: { min: 0, max: 2 } }, tools));
    await pool.start();
    const sessionOf = async (caller: string): Promise<string> => textOf(await pool.call({ tool: 'session', arguments: {}, caller }));
    const [alice, bob] = await Promise.all([Promise.all(Array.from({ length: 5 }, () => sessionOf('alice'))), Promise.all(Array.from({ length: 5 }, () => sessionOf('bob')))]);
    expect(new Set(alice).size).toBe(1);
    expect(new Set(bob).size).toBe(1);
    expect(alice[0]).not.toBe(bob[0]);
    expect(pool.status().instances.map((i) => i.caller).sort()).toEqual(['alice', 'bob']);
  });

  it('ends an in-flight call MCP_SERVER_LOST when the upstream is killed, and serves later calls once it is back', async () => {
    const first = await startUpstream();
    let second: Upstream | undefined;
    const pool = new McpServerPool(
      { server: 'up', launch: { url: first.url, headers: { Authorization: bearer(TOKEN) } }, instances: { min: 1, max: 1 }, restart: { initialDelayMs: 20, maxDelayMs: 200, crashLoopFailures: 1000 } },
      tools,
    );
    try {
      await pool.start();
      const before = textOf(await pool.call({ tool: 'session', arguments: {} }));
      let started!: () => void;
      const running = new Promise<void>((resolve) => (started = resolve));
      const call = rejectionOf(pool.call({ tool: 'slow', arguments: { ms: 60_000 }, onProgress: () => started() }));
      await running;
      await first.kill();
      const lost = await call;
      expect(lost).toMatchObject({ code: 'MCP_SERVER_LOST', details: { server: 'up', toolName: 'slow' } });
      expect(everythingSaid(lost)).not.toContain(TOKEN);
      second = await startUpstream(first.port);
      // The call waits for a new session, which the pool opens once the upstream answers again.
      const after = textOf(await pool.call({ tool: 'session', arguments: {} }));
      expect(after).not.toBe(before);
      expect(textOf(await pool.call({ tool: 'echo', arguments: { message: 'back' } }))).toBe('Echo: back');
    } finally {
      await pool.close();
      await first.kill();
      await second?.kill();
    }
  });

  it('ends a call on a session the upstream forgot (404) MCP_SERVER_LOST, and the next call gets a new session', async () => {
    const upstream = track(await startUpstream());
    const pool = track(new McpServerPool({ server: 'up', launch: { url: upstream.url, headers: { Authorization: bearer(TOKEN) } }, instances: { min: 1, max: 1 }, restart: { initialDelayMs: 10 } }, tools));
    await pool.start();
    const before = textOf(await pool.call({ tool: 'session', arguments: {} }));
    expect(textOf(await pool.call({ tool: 'forget-session', arguments: {} }))).toBe('forgotten');
    await expect(pool.call({ tool: 'echo', arguments: { message: 'x' } })).rejects.toMatchObject({ code: 'MCP_SERVER_LOST' });
    const after = textOf(await pool.call({ tool: 'session', arguments: {} }));
    expect(after).not.toBe(before);
  });

  it('emits toolsChanged once for a burst of list_changed notifications, and lists the new tools', async () => {
    const upstream = track(await startUpstream());
    const pool = track(new McpServerPool({ server: 'up', launch: { url: upstream.url, headers: { Authorization: bearer(TOKEN) } }, instances: { min: 1, max: 1 } }, tools));
    await pool.start();
    expect((await pool.listTools()).tools.map((t) => t.name)).not.toContain('added-1');
    let changes = 0;
    pool.on('toolsChanged', () => (changes += 1));
    const nextChange = (): Promise<void> => new Promise((resolve) => pool.once('toolsChanged', () => resolve()));
    let changed = nextChange();
    expect(textOf(await pool.call({ tool: 'add-tools', arguments: { count: 3 } }))).toBe('added-1,added-2,added-3');
    await changed;
    expect((await pool.listTools()).tools.map((t) => t.name)).toEqual(expect.arrayContaining(['added-1', 'added-2', 'added-3']));
    expect(textOf(await pool.call({ tool: 'added-2', arguments: {} }))).toBe('added-2');
    // A later change is a second event: the three before it made one.
    changed = nextChange();
    await pool.call({ tool: 'add-tools', arguments: { count: 1 } });
    await changed;
    expect(changes).toBe(2);
  });
});
