import { fileURLToPath } from 'node:url';
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { startTellingProcess } from './fixtures/told-process.js';
import { findLaunchTools, type LaunchTools } from '../src/mcp-servers/launch-command.js';
import { McpServerPool } from '../src/mcp-servers/server-pool.js';
import { probeIsolation } from '../src/sandbox/probe.js';
import { failureOf } from './fixtures/fleet-failure.js';
import { closeTracked, track } from './fixtures/tracked.js';

// A call to a 2025-era HTTP upstream that ends (its timeout, a cancel) must cost the worker the call, not a socket:
// the SDK's transport sends `notifications/cancelled` but left the call's POST open until the upstream answered.
// And an SSE answer that ends without the call's response must fail the call then, not at its timeout.
const UPSTREAM = fileURLToPath(new URL('./fixtures/mcp-hangup-upstream.mjs', import.meta.url));

/** Bounded waits for what the worker and the upstream do in the background. */
const WAIT = { timeout: 10_000, interval: 20 };

let tools: LaunchTools;

/** One run of the upstream fixture, with what it told. */
interface Upstream {
  readonly url: string;
  /** Connections open at the upstream now (the session's GET stream, requests not answered yet). */
  connections(): number;
  /** `hang` requests whose connection is still open, and all seen. */
  readonly hung: { readonly open: Set<unknown>; readonly seen: Set<unknown> };
  /** The request ids of the `notifications/cancelled` it received. */
  readonly cancelled: unknown[];
  /** The Last-Event-ID of each GET that resumed a stream. */
  readonly resumed: unknown[];
  close(): Promise<void>;
}

async function startUpstream(): Promise<Upstream> {
  let connections = 0;
  const hung = { open: new Set<unknown>(), seen: new Set<unknown>() };
  const cancelled: unknown[] = [];
  const resumed: unknown[] = [];
  const upstream = await startTellingProcess<{ event: string; port?: number; open?: number; id?: unknown; requestId?: unknown; last?: unknown }>([UPSTREAM], (told) => {
    if (told.event === 'connections' && told.open !== undefined) connections = told.open;
    if (told.event === 'hang-open') {
      hung.open.add(told.id);
      hung.seen.add(told.id);
    }
    if (told.event === 'hang-closed') hung.open.delete(told.id);
    if (told.event === 'cancelled') cancelled.push(told.requestId);
    if (told.event === 'resumed') resumed.push(told.last);
  });
  return { url: `http://127.0.0.1:${upstream.port}/mcp`, connections: () => connections, hung, cancelled, resumed, close: upstream.kill };
}

async function startPool(upstream: Upstream): Promise<McpServerPool> {
  const pool = track(new McpServerPool({ server: 'hangup', launch: { url: upstream.url }, instances: { min: 1, max: 1, callsPerInstance: 32 }, callTimeoutMs: 8_000 }, tools));
  await pool.start();
  return pool;
}

/** The pool's one session serves on: the same session answers a call. */
async function servesOn(pool: McpServerPool, session: string | undefined): Promise<void> {
  expect(await pool.call({ tool: 'echo', arguments: { text: 'still here' } })).toMatchObject({ content: [{ type: 'text', text: 'echo still here' }] });
  expect(pool.status().instances.map((i) => i.id)).toEqual([session]);
}

beforeAll(() => {
  tools = findLaunchTools(probeIsolation(), process.env.PATH ?? '');
});

afterEach(closeTracked);

describe('an HTTP upstream that does not answer a call', () => {
  it('costs each call that times out its POST, not an open connection: the worker hangs up once the cancel is sent, and the session serves on', async () => {
    const upstream = track(await startUpstream());
    const pool = await startPool(upstream);
    const session = pool.status().instances[0]?.id;
    // Half hang before their answer's headers, half after the headers of an SSE answer and a progress notice.
    const calls = Array.from({ length: 16 }, (_, i) => pool.call({ tool: 'hang', arguments: { sse: i % 2 === 1 }, timeoutMs: 500, onProgress: () => undefined }));
    const failures = await Promise.all(calls.map((call) => failureOf(call)));
    expect(failures.map((f) => f.code)).toEqual(Array(16).fill('EXECUTION_TIMEOUT'));
    expect(upstream.hung.seen.size).toBe(16);
    await vi.waitFor(() => expect(upstream.cancelled).toHaveLength(16), WAIT);
    // Before: all 16 stayed open until the upstream answered (here, never).
    await vi.waitFor(() => expect(upstream.hung.open.size).toBe(0), WAIT);
    // The session's GET stream is all that stays open (once the client's connections opened for the burst and left
    // idle reach their keep-alive timeout, 4 s).
    await vi.waitFor(() => expect(upstream.connections()).toBe(1), WAIT);
    await servesOn(pool, session);
  });

  it('costs a cancelled call its POST too', async () => {
    const upstream = track(await startUpstream());
    const pool = await startPool(upstream);
    const session = pool.status().instances[0]?.id;
    for (const sse of [false, true]) {
      const abort = new AbortController();
      const call = failureOf(pool.call({ tool: 'hang', arguments: { sse }, signal: abort.signal }));
      await vi.waitFor(() => expect(upstream.hung.open.size).toBe(1), WAIT);
      abort.abort(new Error('the caller gave up'));
      expect(await call).toMatchObject({ code: 'CANCELLED' });
      await vi.waitFor(() => expect(upstream.hung.open.size).toBe(0), WAIT);
    }
    expect(upstream.cancelled).toEqual([...upstream.hung.seen]);
    await servesOn(pool, session);
  });
});

describe('an HTTP upstream whose SSE answer ends without the response', () => {
  it('fails the call at once, EXECUTION_FAILED, saying so (empty, not JSON, for another request, only progress); progress still flows; the session serves on', async () => {
    const upstream = track(await startUpstream());
    const pool = await startPool(upstream);
    const session = pool.status().instances[0]?.id;
    const progress: number[] = [];
    const started = Date.now();
    // Before: each waited for its 8 s timeout and ended EXECUTION_TIMEOUT.
    const failures = await Promise.all(
      ['empty', 'garbage', 'wrongid', 'progressonly'].map((mode) =>
        failureOf(pool.call({ tool: 'sse-end', arguments: { mode }, ...(mode === 'progressonly' ? { onProgress: (p) => progress.push(p.progress) } : {}) })),
      ),
    );
    expect(Date.now() - started).toBeLessThan(4_000);
    for (const failure of failures) {
      expect(failure.code).toBe('EXECUTION_FAILED');
      expect(failure.message).toContain("MCP server 'hangup'");
      expect(failure.message).toContain('ended without a response');
    }
    expect(progress).toEqual([1]);
    // What passed before still does: a response whose result is null, an answer after its progress.
    const nulled = await failureOf(pool.call({ tool: 'sse-end', arguments: { mode: 'nullresult' } }));
    expect(nulled).toMatchObject({ code: 'EXECUTION_FAILED' });
    expect(nulled.message).toContain('its result is null');
    const steps: number[] = [];
    expect(await pool.call({ tool: 'sse-end', arguments: { mode: 'answer' }, onProgress: (p) => steps.push(p.progress) })).toMatchObject({ content: [{ type: 'text', text: 'answered' }] });
    expect(steps).toEqual([1]);
    await servesOn(pool, session);
  });
});

describe('an HTTP upstream whose SSE answer ends without the response after an event with an id', () => {
  /** Calls whose stream ends after an event with an id (a notice; a priming event), resumed as `resume` says: their failures, once each ended. */
  async function resumedCalls(pool: McpServerPool, resume: string): Promise<Awaited<ReturnType<typeof failureOf>>[]> {
    return Promise.all(['idthenend', 'primeonly'].map((mode) => failureOf(pool.call({ tool: 'sse-end', arguments: { mode, resume } }))));
  }

  for (const [resume, what, said] of [
    ['refuse', 'refuses to resume the stream (405: it offers no GET stream)', 'refused to resume it'],
    ['fail', 'refuses to resume the stream with an error (500)', 'refused to resume it'],
    ['json', 'answers the resumption with JSON, not a stream', 'refused to resume it'],
    ['empty', 'resumes the stream, which ends without the response too', 'its resumption ended without it too'],
  ] as const) {
    it(`fails the call at once, EXECUTION_FAILED, when the upstream ${what}; the session serves on`, async () => {
      const upstream = track(await startUpstream());
      const pool = await startPool(upstream);
      const session = pool.status().instances[0]?.id;
      const started = Date.now();
      // Before (405): the SDK resumed each stream (a GET with its Last-Event-ID) and, refused, waited for the call's
      // 8 s timeout: EXECUTION_TIMEOUT.
      const failures = await resumedCalls(pool, resume);
      // The SDK resumes a stream 1 s after it ended.
      expect(Date.now() - started).toBeLessThan(4_000);
      await vi.waitFor(() => expect(upstream.resumed).toHaveLength(2), WAIT);
      for (const failure of failures) {
        expect(failure.code).toBe('EXECUTION_FAILED');
        expect(failure.message).toContain("MCP server 'hangup'");
        expect(failure.message).toContain('ended without a response');
        expect(failure.message).toContain(said);
      }
      await servesOn(pool, session);
    });
  }

  it('answers the call when the upstream resumes the stream with the response', async () => {
    const upstream = track(await startUpstream());
    const pool = await startPool(upstream);
    for (const mode of ['idthenend', 'primeonly']) {
      expect(await pool.call({ tool: 'sse-end', arguments: { mode, resume: 'answer' } })).toMatchObject({ content: [{ type: 'text', text: 'answered' }] });
    }
    await vi.waitFor(() => expect(upstream.resumed).toHaveLength(2), WAIT);
  });
});
