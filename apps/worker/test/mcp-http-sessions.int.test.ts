import { fileURLToPath } from 'node:url';
import { inspect } from 'node:util';
import { isFleetError, type ToolResult } from '@forge-fleet/shared';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { pino } from 'pino';
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { startTellingProcess } from './fixtures/told-process.js';
import { findLaunchTools, type LaunchTools } from '../src/mcp-servers/launch-command.js';
import { McpToolExecutor } from '../src/mcp-servers/mcp-tool-executor.js';
import { SecretValue } from '../src/mcp-servers/secret-value.js';
import { McpServerPool } from '../src/mcp-servers/server-pool.js';
import type { McpInstanceExit } from '../src/mcp-servers/upstream-instance.js';
import { probeIsolation } from '../src/sandbox/probe.js';
import { closeTracked, track } from './fixtures/tracked.js';

const UPSTREAM = fileURLToPath(new URL('./fixtures/mcp-session-upstream.mjs', import.meta.url));
/** The upstream's token: long and distinctive, so that finding it anywhere is certain. */
const TOKEN = 'tok-9b3e71c4d2a8f605-session-secret';
/** Bounded waits for what the upstream prints. */
const WAIT = { timeout: 10_000, interval: 20 };

let tools: LaunchTools;

/** What the upstream fixture printed: a request it ran, or answered 404 session-not-found without running. */
interface UpstreamEvent {
  readonly event: string;
  readonly tool?: string;
  readonly method?: string;
  readonly session?: string;
  readonly port?: number;
}

interface Upstream {
  readonly url: string;
  readonly events: readonly UpstreamEvent[];
  /** GETs one of the fixture's control paths (`/ctl/expire`: it forgets every session). */
  control(path: string): Promise<void>;
  close(): Promise<void>;
}

async function startUpstream(): Promise<Upstream> {
  const upstream = await startTellingProcess<UpstreamEvent>([UPSTREAM, '0']);
  const control = async (path: string): Promise<void> => {
    const response = await fetch(`http://127.0.0.1:${upstream.port}${path}`);
    await response.text();
    if (!response.ok) throw new Error(`${path}: HTTP ${response.status}`);
  };
  return { url: `http://127.0.0.1:${upstream.port}/mcp`, events: upstream.told, control, close: upstream.kill };
}

const launchOf = (upstream: Upstream) => ({ url: upstream.url, headers: { Authorization: new SecretValue(`Bearer ${TOKEN}`, 'environment variable UPSTREAM_TOKEN') } });

/** How many times the upstream ran `tool`, and how many of its calls it answered 404 without running them. */
function countsOf(upstream: Upstream, tool: string): { ran: number; notFound: number } {
  const of = (event: string): number => upstream.events.filter((e) => e.event === event && e.tool === tool).length;
  return { ran: of('ran'), notFound: of('404') };
}

function textOf(result: CallToolResult): string {
  return result.content.map((block) => (block.type === 'text' ? block.text : '')).join('');
}

/** A call of `tool` through the executor a worker's catalog would hold for it, as `caller`. */
function run(pool: McpServerPool, tool: string, args: Record<string, unknown> = {}, caller?: string): Promise<ToolResult> {
  const executor = new McpToolExecutor(`up.${tool}`, { server: 'up', tool, timeoutMs: undefined }, pool, pino({ level: 'silent' }), caller);
  const call = { id: `c-${tool}`, name: `up.${tool}`, arguments: args };
  return executor.execute(call, { call, signal: new AbortController().signal, tier: 'host', attempt: 1, env: {}, trust: 'trusted', progress: () => undefined });
}

/** The FleetError a promise rejects with. */
async function rejectionOf(promise: Promise<unknown>): Promise<Error & { code: string }> {
  const err: unknown = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!isFleetError(err)) throw new Error(`expected a FleetError, got ${inspect(err)}`);
  return err;
}

/** Every instance exit the pool tells, from now on. */
function exitsOf(pool: McpServerPool): (McpInstanceExit & { failed: boolean })[] {
  const exits: (McpInstanceExit & { failed: boolean })[] = [];
  pool.on('instanceExited', (exit) => exits.push(exit));
  return exits;
}

beforeAll(() => {
  tools = findLaunchTools(probeIsolation(), process.env.PATH ?? '');
});

afterEach(closeTracked);

describe('sessions with a Streamable HTTP upstream that ends them (HTTP 404 to their session id)', () => {
  it('sends a call the upstream answered 404 again, once, on a new session, and the caller gets its result', async () => {
    const upstream = track(await startUpstream());
    // One failure would stop the pool: the expiries below must not count as failures.
    const pool = track(new McpServerPool({ server: 'up', launch: launchOf(upstream), instances: { min: 1, max: 1 }, restart: { initialDelayMs: 1, crashLoopFailures: 1 } }, tools));
    const exits = exitsOf(pool);
    await pool.start();
    let session = (await run(pool, 'session')).content;
    for (const round of [1, 2, 3]) {
      await upstream.control('/ctl/expire');
      const result = await run(pool, 'echo', { message: `round ${round}` });
      expect(result).toMatchObject({ content: `Echo: round ${round}`, isError: false });
      // Sent twice, run once: the first was answered 404 and not run.
      expect(countsOf(upstream, 'echo')).toEqual({ ran: round, notFound: round });
      const now = (await run(pool, 'session')).content;
      expect(now).not.toBe(session);
      session = now;
    }
    expect(pool.status().state).toBe('running');
    expect(exits).toHaveLength(3);
    expect(exits.every((exit) => !exit.failed && exit.expected)).toBe(true);
  });

  it("sends a perCaller caller's call again on that caller's new session", async () => {
    const upstream = track(await startUpstream());
    const pool = track(new McpServerPool({ server: 'up', launch: launchOf(upstream), session: 'perCaller', instances: { min: 0, max: 2 }, restart: { initialDelayMs: 1, crashLoopFailures: 1 } }, tools));
    await pool.start();
    const alice = (await run(pool, 'session', {}, 'alice')).content;
    const bob = (await run(pool, 'session', {}, 'bob')).content;
    await upstream.control('/ctl/expire');
    expect(await run(pool, 'echo', { message: 'again' }, 'alice')).toMatchObject({ content: 'Echo: again', isError: false });
    expect(countsOf(upstream, 'echo')).toEqual({ ran: 1, notFound: 1 });
    const aliceNow = (await run(pool, 'session', {}, 'alice')).content;
    expect([alice, bob]).not.toContain(aliceNow);
    expect(pool.status().instances.find((i) => i.caller === 'alice')?.id).toBe(`session ${aliceNow.slice(0, 8)}… at ${upstream.url}`);
  });

  it('never sends again a call that may have run: one in flight when the session ended, one that failed', async () => {
    const upstream = track(await startUpstream());
    const pool = track(new McpServerPool({ server: 'up', launch: launchOf(upstream), instances: { min: 1, max: 1 }, restart: { initialDelayMs: 1 } }, tools));
    await pool.start();
    await run(pool, 'session');
    // Running at the upstream when its session ends: whether it took effect is unknown.
    const slow = rejectionOf(run(pool, 'slow', { ms: 60_000 }));
    await vi.waitFor(() => expect(countsOf(upstream, 'slow').ran).toBe(1), WAIT);
    await upstream.control('/ctl/expire');
    // Answered 404 (not run), which ends the session: sent again; the call in flight is not.
    expect(await run(pool, 'echo', { message: 'after' })).toMatchObject({ content: 'Echo: after', isError: false });
    expect(await slow).toMatchObject({ code: 'MCP_SERVER_LOST' });
    expect(countsOf(upstream, 'slow')).toEqual({ ran: 1, notFound: 0 });
    // A failure the upstream answered after it ran the call.
    expect(await rejectionOf(run(pool, 'status', { code: 500 }))).toMatchObject({ code: 'EXECUTION_FAILED' });
    expect(countsOf(upstream, 'status')).toEqual({ ran: 1, notFound: 0 });
  });

  it("ends a call whose second sending is answered 404 too with that sending's error", async () => {
    const upstream = track(await startUpstream());
    const pool = track(new McpServerPool({ server: 'up', launch: launchOf(upstream), instances: { min: 1, max: 1 }, restart: { initialDelayMs: 1 } }, tools));
    await pool.start();
    await run(pool, 'session');
    const failure = await rejectionOf(run(pool, 'expire_now'));
    expect(failure).toMatchObject({ code: 'MCP_SERVER_LOST', details: { server: 'up', toolName: 'up.expire_now' } });
    // It did not run, and says so (not "whether it took effect is unknown").
    expect((failure as Error).message).toMatch(/did not run/);
    // Once, and once again: no more.
    expect(countsOf(upstream, 'expire_now')).toEqual({ ran: 0, notFound: 2 });
    expect(inspect(failure, { depth: 20 })).not.toContain(TOKEN);
  });

  it('ends an instance whose session the upstream forgot as an expected end, which is no failure towards a crash loop', async () => {
    const upstream = track(await startUpstream());
    const pool = track(new McpServerPool({ server: 'up', launch: launchOf(upstream), instances: { min: 1, max: 1 }, restart: { initialDelayMs: 1, crashLoopFailures: 1 } }, tools));
    const exits = exitsOf(pool);
    await pool.start();
    const before = textOf(await pool.call({ tool: 'session', arguments: {} }));
    await upstream.control('/ctl/expire');
    // The pool itself does not send a call again: it tells it as not run, with the code of a lost instance.
    await expect(pool.call({ tool: 'echo', arguments: { message: 'x' } })).rejects.toMatchObject({ code: 'MCP_SERVER_LOST', message: expect.stringContaining('did not run') as string });
    expect(exits).toEqual([expect.objectContaining({ expected: true, failed: false, detail: expect.stringContaining('HTTP 404') as string })]);
    expect(textOf(await pool.call({ tool: 'session', arguments: {} }))).not.toBe(before);
    expect(pool.status().state).toBe('running');
  });

  it('counts a session the upstream forgot before answering any request on it as a failure, as an upstream that keeps no session', async () => {
    const upstream = track(await startUpstream());
    const pool = track(new McpServerPool({ server: 'up', launch: launchOf(upstream), instances: { min: 1, max: 1 }, restart: { initialDelayMs: 1, crashLoopFailures: 1 } }, tools));
    const exits = exitsOf(pool);
    const stopped = new Promise<void>((resolve) => pool.once('stopped', () => resolve()));
    await pool.start();
    await upstream.control('/ctl/expire');
    await expect(pool.call({ tool: 'echo', arguments: { message: 'x' } })).rejects.toMatchObject({ code: 'MCP_SERVER_LOST' });
    await stopped;
    expect(exits).toEqual([expect.objectContaining({ failed: true })]);
  });

  it('says that an upstream answering initialize with a JSON-RPC error refused the handshake, with that error redacted', async () => {
    const upstream = track(await startUpstream());
    await upstream.control('/ctl/initerr?on=1');
    const pool = track(new McpServerPool({ server: 'up', launch: launchOf(upstream), instances: { min: 1, max: 1 }, restart: { initialDelayMs: 1, crashLoopFailures: 1 } }, tools));
    const failure = await rejectionOf(pool.start());
    expect(failure).toMatchObject({ code: 'UNAVAILABLE' });
    expect(failure.message).toContain(`MCP server 'up' (${upstream.url})`);
    expect(failure.message).toContain('it refused the handshake: it answered initialize with MCP error -32603: init refused for [redacted]');
    expect(failure.message).not.toContain('cannot be reached');
    expect(inspect(failure, { depth: 20 })).not.toContain(TOKEN);
  });
});
