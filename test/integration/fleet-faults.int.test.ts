import { randomUUID } from 'node:crypto';
import { FleetClient } from '@forge-fleet/client';
import { Redis } from 'ioredis';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { TestFleet } from '../fixtures/fleet.js';
import { redisUrl } from '../fixtures/redis.js';
import { until } from '../fixtures/wait.js';

/**
 * Workers die here for real: kill -9 of the process running a call. Locks
 * are 2 s in these fleets, so losses are found within a few seconds.
 */
describe('worker loss and shutdown', () => {
  let fleet: TestFleet;
  let redis: Redis;
  let client: FleetClient | undefined;
  const started = async (id: string): Promise<number> => Number((await redis.blpop(`${fleet.prefix}:test:started:{${id}}`, 15))?.[1]);
  const runs = (id: string) => redis.get(`${fleet.prefix}:test:runs:{${id}}`).then((v) => Number(v ?? 0));

  beforeEach(() => {
    fleet = new TestFleet();
    redis = new Redis(redisUrl());
  });

  afterEach(async () => {
    await client?.close();
    client = undefined;
    redis.disconnect();
    await fleet.stopAll();
  });

  it('re-runs a retryable call on another worker when its worker is killed mid-call', async () => {
    const workers = await Promise.all([fleet.worker({ tier: 'platform' }), fleet.worker({ tier: 'platform' })]);
    client = new FleetClient({ url: (await fleet.dispatcher()).url });
    const id = `kill-retryable-${randomUUID()}`;
    await client.submit('block_retryable', {}, { id });
    const victim = await started(id);
    workers.find((w) => w.pid === victim)!.proc.kill('SIGKILL');
    const result = await client.wait(id, { timeoutMs: 20_000 });
    expect(result).toMatchObject({ isError: false, structuredContent: { runs: 2 } });
    expect(result.structuredContent?.ranOn).not.toBe(victim);
    expect(await runs(id)).toBe(2);
  });

  it("ends a started call whose only worker is killed as its tool allows: WORKER_LOST not to be sent again, or a retryable tool's NO_WORKER with its runs", async () => {
    const worker = await fleet.worker({ tier: 'platform' });
    client = new FleetClient({ url: (await fleet.dispatcher()).url });
    const once = `alone-once-${randomUUID()}`;
    const again = `alone-retryable-${randomUUID()}`;
    await client.submit('block', {}, { id: once });
    await client.submit('block_retryable', {}, { id: again });
    await Promise.all([started(once), started(again)]);
    worker.proc.kill('SIGKILL');
    // No worker is left to take either: the dispatcher's sweep of the dead pack ends them.
    const lost = await client.wait(once, { timeoutMs: 20_000 });
    expect(lost.error, JSON.stringify(lost)).toMatchObject({ code: 'WORKER_LOST', retryable: false });
    // It ran once (FleetClient resolves with it, as with any call whose tool ran): it may be sent again.
    const stranded = await client.wait(again, { timeoutMs: 20_000 });
    expect(stranded.error, JSON.stringify(stranded)).toMatchObject({ code: 'NO_WORKER', retryable: true, details: { runs: 1 } });
  });

  it('never runs a non-retryable call twice: killing its worker ends it with WORKER_LOST', async () => {
    const workers = await Promise.all([fleet.worker({ tier: 'platform' }), fleet.worker({ tier: 'platform' })]);
    client = new FleetClient({ url: (await fleet.dispatcher()).url });
    const id = `kill-once-${randomUUID()}`;
    await client.submit('block', {}, { id });
    const victim = await started(id);
    workers.find((w) => w.pid === victim)!.proc.kill('SIGKILL');
    const result = await client.wait(id, { timeoutMs: 20_000 });
    expect(result).toMatchObject({ isError: true, error: { code: 'WORKER_LOST' } });
    expect(await runs(id)).toBe(1);
  });

  it('on SIGTERM a worker takes no new calls, finishes the active one and exits 0', async () => {
    const worker = await fleet.worker({ tier: 'platform' });
    client = new FleetClient({ url: (await fleet.dispatcher()).url });
    const id = `drain-${randomUUID()}`;
    await client.submit('gated', {}, { id });
    await started(id);
    const exit = worker.stop('SIGTERM');
    await redis.lpush(`${fleet.prefix}:test:release:{${id}}`, 'go');
    expect(await exit).toBe(0);
    expect(await client.wait(id, { timeoutMs: 10_000 })).toMatchObject({ isError: false, structuredContent: { released: true } });
    expect(worker.output()).toContain('worker pool stopped');
  });

  it('past the grace period, shutdown aborts a non-retryable call with WORKER_LOST and still exits', async () => {
    const worker = await fleet.worker({ tier: 'platform', env: { FORGE_SHUTDOWN_GRACE_MS: '200' } });
    client = new FleetClient({ url: (await fleet.dispatcher()).url });
    const id = `grace-${randomUUID()}`;
    await client.submit('block', {}, { id });
    await started(id);
    expect(await worker.stop('SIGTERM')).toBe(0);
    expect(await client.wait(id, { timeoutMs: 10_000 })).toMatchObject({ isError: true, error: { code: 'WORKER_LOST' } });
    expect(await runs(id)).toBe(1);
  });

  it('a call for a tool whose workers are all gone fails at once with NO_WORKER', async () => {
    const worker = await fleet.worker({ tier: 'embedded' });
    const dispatcher = await fleet.dispatcher();
    client = new FleetClient({ url: dispatcher.url });
    expect((await client.call('embedded_echo', {})).isError).toBe(false);
    expect(await worker.stop('SIGTERM')).toBe(0);
    await expect(client.call('embedded_echo', {})).rejects.toMatchObject({ code: 'NO_WORKER', httpStatus: 503 });
  });

  it('a busy worker does not hoard queued calls: another worker started later takes them', async () => {
    const a = await fleet.worker({ tier: 'platform', concurrency: 2 });
    const dispatcher = await fleet.dispatcher();
    client = new FleetClient({ url: dispatcher.url });
    // One request of five calls leaves as one job: worker A runs two and holds three, and must fetch nothing more.
    const batchIds = Array.from({ length: 5 }, (_, i) => `held-${i}-${randomUUID()}`);
    const batch = fetch(`${dispatcher.url}/v1/calls/batch`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ calls: batchIds.map((id) => ({ id, name: 'gated', arguments: {} })) }),
    });
    await (await batch).text();
    const startedOnA: number[] = [];
    for (const id of batchIds) {
      const pid = await redis.lpop(`${fleet.prefix}:test:started:{${id}}`);
      if (pid !== null) startedOnA.push(Number(pid));
    }
    while (startedOnA.length < 2) {
      const hit = await redis.blpop(batchIds.map((id) => `${fleet.prefix}:test:started:{${id}}`), 10);
      startedOnA.push(Number(hit?.[1]));
    }
    expect(startedOnA).toEqual([a.pid, a.pid]);
    // Later calls, each its own job, must wait in Redis for a worker with room — not in A's memory.
    const later = Array.from({ length: 3 }, (_, i) => `later-${i}-${randomUUID()}`);
    const solo = new FleetClient({ url: dispatcher.url, batch: false });
    try {
      for (const id of later) await solo.submit('gated', {}, { id });
    } finally {
      await solo.close();
    }
    const b = await fleet.worker({ tier: 'platform', concurrency: 4 });
    const pids = await Promise.all(later.map((id) => started(id)));
    expect(pids).toEqual([b.pid, b.pid, b.pid]);
  });

  it('refuses a second worker that announces a different definition under a live tool name', async () => {
    await fleet.worker({ tier: 'platform' });
    await expect(fleet.worker({ tier: 'platform', tools: 'test/fixtures/conflicting-tools.ts' })).rejects.toThrow(/REGISTRY_ERROR.*'echo'/);
  });

  it('serves neither of two tools of one name announced in different lanes: a sandbox worker cannot take over a Host tool', async () => {
    await fleet.worker({ tier: 'host' });
    client = new FleetClient({ url: (await fleet.dispatcher()).url, token: await fleet.token({ subject: 'ops', grants: ['host_echo'] }) });
    expect((await client.call('host_echo', { n: 1 })).isError).toBe(false);
    await fleet.worker({ tier: 'platform', tools: 'test/fixtures/squatting-tools.ts' });
    // Workers joining make the dispatcher re-read the catalog; wait until it has seen the second announcement.
    const error = await until('host_echo to be refused once the squatter is seen', () =>
      client!.call('host_echo', { n: 2 }).then(
        () => undefined,
        (e: unknown) => e as { code?: string; httpStatus?: number; message?: string },
      ),
    );
    expect(error).toMatchObject({ code: 'REGISTRY_ERROR', httpStatus: 409 });
    expect(error.message).toMatch(/several queues \(host, platform\)/);
    expect((await client.tools()).map((t) => t.name)).not.toContain('host_echo');
  });

  it('refuses to start a worker whose module has no tools of its tier', async () => {
    await expect(fleet.worker({ tier: 'host', pool: 'nobody' })).rejects.toThrow(/CONFIG_INVALID.*no host-tier tools for pool nobody/);
  });
});

describe('many dispatchers, many workers', () => {
  const fleet = new TestFleet();
  let redis: Redis;

  afterEach(async () => {
    redis?.disconnect();
    await fleet.stopAll();
  });

  it('submits on one dispatcher and answers on another', async () => {
    redis = new Redis(redisUrl());
    await fleet.worker({ tier: 'platform' });
    const [d1, d2] = await Promise.all([fleet.dispatcher(), fleet.dispatcher()]);
    const c1 = new FleetClient({ url: d1.url });
    const c2 = new FleetClient({ url: d2.url });
    try {
      const id = `cross-${randomUUID()}`;
      await c1.submit('gated', {}, { id });
      await redis.blpop(`${fleet.prefix}:test:started:{${id}}`, 10);
      const waiting = c2.wait(id, { timeoutMs: 10_000 });
      // Release only once the second dispatcher is registered as a watcher, so the push path is what answers.
      const watchers = `${fleet.prefix}:call:platform:{${id}}:watchers`;
      await until('the second dispatcher to watch the call', async () => (await redis.scard(watchers)) > 0);
      await redis.lpush(`${fleet.prefix}:test:release:{${id}}`, 'go');
      expect(await waiting).toMatchObject({ isError: false, structuredContent: { released: true } });
      expect((await c1.get(id)).status).toBe('completed');
    } finally {
      await Promise.all([c1.close(), c2.close()]);
    }
  });

  it('answers 2,000 concurrent calls through two dispatchers and three workers, each exactly once', async () => {
    redis = new Redis(redisUrl());
    await Promise.all([0, 1, 2].map(() => fleet.worker({ tier: 'platform', concurrency: 64 })));
    const dispatchers = await Promise.all([fleet.dispatcher(), fleet.dispatcher()]);
    const clients = dispatchers.map((d) => new FleetClient({ url: d.url, connections: 128 }));
    try {
      const ids = Array.from({ length: 2000 }, (_, i) => `load-${i}-${randomUUID()}`);
      const results = await Promise.all(ids.map((id, i) => clients[i % 2]!.call('count', { n: i }, { id, timeoutMs: 60_000 })));
      results.forEach((result, i) => {
        expect(result).toMatchObject({ toolCallId: ids[i], isError: false, structuredContent: { n: i, runs: 1 } });
      });
      const counts = await redis.mget(...ids.map((id) => `${fleet.prefix}:test:runs:{${id}}`));
      expect(counts.filter((c) => c === '1')).toHaveLength(ids.length);
    } finally {
      await Promise.all(clients.map((c) => c.close()));
    }
  }, 90_000);
});

describe('dispatcher shutdown', () => {
  const fleet = new TestFleet();
  let redis: Redis;

  afterEach(async () => {
    redis?.disconnect();
    await fleet.stopAll();
  });

  it('on SIGTERM answers the requests it holds, exits 0, and the call is answered by another dispatcher later', async () => {
    redis = new Redis(redisUrl());
    await fleet.worker({ tier: 'platform' });
    const [first, second] = await Promise.all([fleet.dispatcher(), fleet.dispatcher()]);
    const c1 = new FleetClient({ url: first.url });
    const c2 = new FleetClient({ url: second.url });
    try {
      const id = `dispatcher-drain-${randomUUID()}`;
      const held = c1.submit('gated', {}, { id, waitMs: 30_000 });
      await redis.blpop(`${fleet.prefix}:test:started:{${id}}`, 10);
      expect(await first.stop('SIGTERM')).toBe(0);
      expect(await held).toMatchObject({ id, status: 'running' });
      await redis.lpush(`${fleet.prefix}:test:release:{${id}}`, 'go');
      expect(await c2.wait(id, { timeoutMs: 10_000 })).toMatchObject({ isError: false, structuredContent: { released: true } });
    } finally {
      await Promise.all([c1.close(), c2.close()]);
    }
  });
});
