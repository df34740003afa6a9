import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { FleetClient } from '@forge-fleet/client';
import { startLocalRedis } from '@forge-fleet/local-redis';
import type { ToolResult } from '@forge-fleet/shared';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { type FleetProcess, ROOT, TestFleet } from '../fixtures/fleet.js';
import { fleetPerTest } from '../fixtures/fleet-per-test.js';
import { until } from '../fixtures/wait.js';

const PACK_TOOLS = join(ROOT, 'test', 'fixtures', 'pack-tools.ts');

/**
 * Routing by tool: workers of one lane that carry different tool packs. Each
 * call must reach a worker that serves its tool, never run twice, and never
 * wait on a queue no live worker reads.
 */
describe('workers of one lane with different tool packs', () => {
  const t = fleetPerTest();
  const worker = (pack: string, concurrency = 32): Promise<FleetProcess> => t.fleet.worker({ tier: 'host', tools: PACK_TOOLS, concurrency, env: { FORGE_TEST_PACK: pack } });

  it('answers thousands of concurrent calls of every tool of three packs (one tool in two), each run once, by a worker that serves it', async () => {
    const [a, b, c] = await Promise.all([worker('mix_a,mix_shared'), worker('mix_b,mix_shared'), worker('mix_c')]);
    t.client = new FleetClient({ url: (await t.fleet.dispatcher({ FORGE_APPROVAL: 'auto' })).url });
    const tools = ['mix_a', 'mix_b', 'mix_c', 'mix_shared'] as const;
    const calls = Array.from({ length: 3000 }, (_, i) => ({ id: `mix-${i}-${randomUUID()}`, tool: tools[i % tools.length]! }));
    const results = await Promise.all(calls.map(({ id, tool }) => t.client!.call(tool, { n: 1 }, { id, timeoutMs: 60_000 })));
    const servedBy = new Map<string, Set<number>>();
    results.forEach((result: ToolResult, i) => {
      expect(result, calls[i]!.tool).toMatchObject({ isError: false, structuredContent: { tool: calls[i]!.tool, runs: 1 } });
      const pid = (result.structuredContent as { pid: number }).pid;
      servedBy.set(calls[i]!.tool, (servedBy.get(calls[i]!.tool) ?? new Set()).add(pid));
    });
    expect(await t.runsOf(calls.map((c) => c.id))).toEqual(calls.map(() => 1));
    // Each tool ran only where it is served; the shared one on both of its packs' workers.
    expect([...servedBy.get('mix_a')!]).toEqual([a.pid]);
    expect([...servedBy.get('mix_b')!]).toEqual([b.pid]);
    expect([...servedBy.get('mix_c')!]).toEqual([c.pid]);
    expect([...servedBy.get('mix_shared')!].sort()).toEqual([a.pid, b.pid].sort());
  }, 90_000);

  it('a worker joining and another leaving under load fail no call and run none twice', async () => {
    const first = await worker('mix_a,mix_shared');
    await worker('mix_b,mix_shared');
    t.client = new FleetClient({ url: (await t.fleet.dispatcher({ FORGE_APPROVAL: 'auto' })).url });
    const ids: string[] = [];
    let sending = true;
    const sent: Promise<ToolResult>[] = [];
    // A steady stream of calls of the shared tool (each holding its worker for 20 ms) while the t.fleet changes, until
    // the test ends: a count cap ran out on a slow machine before the worker left (about 2,000 calls a second).
    const load = (async () => {
      for (let i = 0; sending && i < 1_000_000; i++) {
        const id = `churn-${i}-${randomUUID()}`;
        ids.push(id);
        sent.push(t.client!.call('mix_shared', { ms: 20 }, { id, timeoutMs: 60_000 }));
        if (i % 20 === 19) await new Promise((resolve) => setTimeout(resolve, 10));
      }
    })();
    try {
      await until('calls under way', () => ids.length > 200);
      const joined = await worker('mix_a,mix_shared');
      await until('calls served by the worker that joined', async () => (await Promise.all(sent.slice(-100))).some((r) => (r.structuredContent as { pid?: number }).pid === joined.pid), { timeoutMs: 30_000 });
      expect(await first.stop('SIGTERM')).toBe(0);
      const after = ids.length;
      await until('calls sent after the worker left', () => ids.length > after + 200);
    } finally {
      sending = false;
    }
    await load;
    const results = await Promise.all(sent);
    for (const result of results) expect(result).toMatchObject({ isError: false, structuredContent: { runs: 1 } });
    expect(await t.runsOf(ids)).toEqual(ids.map(() => 1));
  }, 90_000);

  it('a call never waits on a pack whose only worker stopped: many stops interleaved with calls, every call answered', async () => {
    // Another pack keeps the lane (and the dispatcher's view of it) alive; `mix_lonely` has one worker at a time.
    await worker('mix_a');
    t.client = new FleetClient({ url: (await t.fleet.dispatcher({ FORGE_APPROVAL: 'auto' })).url, retryWindowMs: 0 });
    const outcomes: string[] = [];
    for (let round = 0; round < 4; round++) {
      const lonely = await worker('mix_lonely');
      await until('the lonely worker is served', async () => (await t.client!.call('mix_lonely', {}).then((r) => !r.isError, () => false)));
      // Calls keep coming while the only worker of their pack stops: the stop's lease removal races the submits.
      const calls: Promise<string>[] = [];
      let stopping: Promise<number | null> | undefined;
      for (let i = 0; i < 200; i++) {
        if (i === 40) stopping = lonely.stop('SIGTERM');
        calls.push(
          t.client.call('mix_lonely', { ms: 5 }, { timeoutMs: 15_000 }).then(
            (r) => (r.isError ? `failed ${r.error?.code}` : 'completed'),
            (e: { code?: string }) => `refused ${e.code}`,
          ),
        );
        if (i % 10 === 9) await new Promise((resolve) => setTimeout(resolve, 5));
      }
      expect(await stopping).toBe(0);
      outcomes.push(...(await Promise.all(calls)));
    }
    // Each call ran, or was refused NO_WORKER (before or after it was enqueued): none timed out waiting.
    for (const outcome of outcomes) expect(outcome).toMatch(/^(completed|refused NO_WORKER|failed NO_WORKER)$/);
    expect(outcomes.some((o) => o !== 'completed')).toBe(true);
  }, 90_000);

  it('calls queued on a pack whose worker was killed move to another pack serving their tool, or end NO_WORKER when none does', async () => {
    // 80 calls of 5 s each on a worker of 8 slots: most still wait in its pack's queue when it dies.
    const doomed = await worker('mix_a,mix_shared', 8);
    t.client = new FleetClient({ url: (await t.fleet.dispatcher({ FORGE_APPROVAL: 'auto' })).url, retryWindowMs: 0 });
    const shared = Array.from({ length: 40 }, (_, i) => ({ id: `stranded-${i}-${randomUUID()}` }));
    const lonely = Array.from({ length: 40 }, (_, i) => ({ id: `alone-${i}-${randomUUID()}` }));
    const sharedCalls = shared.map(({ id }) => t.client!.call('mix_shared', { ms: 5000 }, { id, timeoutMs: 60_000 }));
    // A call that ends NO_WORKER never ran: FleetClient throws it.
    const lonelyCalls = lonely.map(({ id }) => t.client!.call('mix_a', { ms: 5000 }, { id, timeoutMs: 60_000 }).catch((error: { code?: string }) => `thrown ${error.code}`));
    await until('the doomed worker runs calls', async () => (await t.runsOf([...shared, ...lonely].map((c) => c.id))).some((r) => r > 0));
    // Another pack serving only the shared tool joins, then the first worker dies without a word.
    const survivor = await worker('mix_b,mix_shared');
    doomed.proc.kill('SIGKILL');
    const sharedResults = await Promise.all(sharedCalls);
    const lonelyResults = await Promise.all(lonelyCalls);
    const ranOn = (r: ToolResult) => (r.structuredContent as { pid: number }).pid;
    // The shared tool's calls: those the dead worker had started are lost (the tool is not retryable), those it
    // finished before it died are answered; the rest ran on the survivor.
    for (const r of sharedResults) {
      if (r.isError) expect(r.error?.code).toBe('WORKER_LOST');
      else expect([doomed.pid, survivor.pid]).toContain(ranOn(r));
    }
    expect(sharedResults.filter((r) => !r.isError && ranOn(r) === survivor.pid).length).toBeGreaterThan(0);
    // mix_a has no other worker: its waiting calls end NO_WORKER (thrown: they never ran), its started ones WORKER_LOST; none hangs.
    // A started call of a tool not flagged retryable must not be sent again: its error says `retryable: false`.
    for (const r of lonelyResults) {
      if (typeof r === 'string') expect(r).toBe('thrown NO_WORKER');
      else if (r.isError) expect(r.error, JSON.stringify(r)).toMatchObject({ code: 'WORKER_LOST', retryable: false });
      else expect(ranOn(r)).toBe(doomed.pid);
    }
    expect(lonelyResults).toContain('thrown NO_WORKER');
    expect(Math.max(...(await t.runsOf([...shared, ...lonely].map((c) => c.id))))).toBe(1);
  }, 90_000);
});

/**
 * A worker blocks on one queue (its pack's) whatever the number of tools it
 * serves: its Redis connections are the same handful with 500 tools as with one.
 */
describe('a worker carrying hundreds of tools', () => {
  it('holds as many Redis connections with 500 tools as with one, and serves every one of them', async () => {
    const own = await startLocalRedis();
    const fleet = new TestFleet({ redisUrl: own.url });
    const redis = new Redis(own.url);
    const client = new FleetClient({ url: (await fleet.dispatcher({ FORGE_APPROVAL: 'auto' })).url });
    try {
      const names = async (): Promise<string[]> => ((await redis.client('LIST')) as string).trim().split('\n').map((line) => /\bname=(\S*)/.exec(line)?.[1] ?? '');
      const before = (await names()).length;
      const one = await fleet.worker({ tier: 'host', tools: PACK_TOOLS, env: { FORGE_TEST_PACK: 'mix_a' } });
      const withOne = (await names()).length - before;
      await one.stop('SIGTERM');
      await until('the one-tool worker’s connections to close', async () => (await names()).length === before);
      await fleet.worker({ tier: 'host', tools: PACK_TOOLS, env: { FORGE_TEST_PACK: 'mix_b', FORGE_TEST_MANY: '500' } });
      const withMany = (await names()).length - before;
      expect(withMany).toBe(withOne);
      expect(withMany).toBeLessThanOrEqual(6);
      const tools = ['mix_b', 'many_0', 'many_250', 'many_499'];
      for (const r of await Promise.all(tools.map((tool) => client.call(tool, {}, { timeoutMs: 30_000 })))) expect(r).toMatchObject({ isError: false, structuredContent: { runs: 1 } });
    } finally {
      await client.close();
      redis.disconnect();
      await fleet.stopAll();
      await own.stop();
    }
  });
});
