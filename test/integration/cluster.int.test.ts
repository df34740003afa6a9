import { randomUUID } from 'node:crypto';
import { FleetClient } from '@forge-fleet/client';
import { type LocalRedisCluster, startLocalRedisCluster } from '@forge-fleet/local-redis';
import { laneOf, queueName, type Tier } from '@forge-fleet/shared';
import { fleetKeys } from '@forge-fleet/store';
import { Cluster } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { type FleetProcess, TestFleet } from '../fixtures/fleet.js';
import { progressed } from '../fixtures/wait.js';

/**
 * The whole fleet on a Redis Cluster of three masters: two dispatchers and a
 * worker per tier and host pool, all given `REDIS_URL=redis+cluster://…`.
 * Calls of every tier, a call a person approves, a cancel, progress and the
 * audit read all work; each queue's keys stay in its hash tag's slot while the
 * queues spread over the shards; and no command anywhere was refused with
 * CROSSSLOT or redirected with MOVED/ASK, and no job failed.
 */
describe('the fleet on a Redis Cluster', () => {
  // A fixed prefix: this test owns its cluster, and these queue names land in four different slots on all three shards.
  const prefix = 'cluster';
  const keys = fleetKeys(prefix);
  const queues: { tier: Tier; pool?: string }[] = [{ tier: 'platform' }, { tier: 'embedded' }, { tier: 'host' }, { tier: 'host', pool: 'payments' }];
  let cluster: LocalRedisCluster;
  let fleet: TestFleet;
  let redis: Cluster;
  const processes: FleetProcess[] = [];
  let admin: string;
  /** On dispatcher A. */
  let agent: FleetClient;
  /** The same agent on dispatcher B. */
  let agentOnB: FleetClient;
  /** An approver on dispatcher B. */
  let approver: FleetClient;
  let urlA: string;
  /** Calls that ran to completion; each must have exactly one `completed` outcome in the audit stream. */
  const completed: string[] = [];

  const runs = async (id: string) => Number((await redis.get(`${prefix}:test:runs:{${id}}`)) ?? 0);

  /** The master (by port) that serves `slot`, from the cluster's own slot map. */
  let slotMap: Awaited<ReturnType<typeof readSlots>> | undefined;
  const readSlots = () => redis.cluster('SLOTS');
  async function slotOwner(slot: number): Promise<number> {
    slotMap ??= await readSlots();
    const master = slotMap.find(([from, to]) => slot >= from && slot <= to)?.[2];
    if (master === undefined) throw new Error(`no shard serves slot ${slot}`);
    return master[1];
  }

  async function audit(query: string): Promise<Record<string, unknown>[]> {
    const response = await fetch(`${urlA}/v1/audit?${query}`, { headers: { authorization: `Bearer ${admin}` } });
    const body = (await response.json()) as { entries: Record<string, unknown>[] };
    expect(response.status, JSON.stringify(body)).toBe(200);
    return body.entries;
  }

  beforeAll(async () => {
    cluster = await startLocalRedisCluster();
    fleet = new TestFleet({ redisUrl: cluster.url, prefix });
    redis = new Cluster(cluster.ports.map((port) => ({ host: '127.0.0.1', port })));
    processes.push(
      ...(await Promise.all([
        fleet.worker({ tier: 'platform', env: { FORGE_PROGRESS_INTERVAL_MS: '20' } }),
        fleet.worker({ tier: 'embedded' }),
        fleet.worker({ tier: 'host' }),
        fleet.worker({ tier: 'host', pool: 'payments' }),
      ])),
    );
    const common = { FORGE_DEV_MODE: '0', FORGE_APPROVAL_DEADLINE_MS: '60000' };
    const [a, b] = await Promise.all([fleet.dispatcher(common), fleet.dispatcher(common)]);
    processes.push(a, b);
    urlA = a.url;
    const [agentToken, approverToken] = await Promise.all([
      fleet.token({ subject: 'agent-1', grants: ['host_echo', 'pool_echo', 'host_count'] }),
      fleet.token({ subject: 'alice', role: 'approver' }),
    ]);
    admin = await fleet.token({ subject: 'auditor', role: 'admin' });
    agent = new FleetClient({ url: a.url, token: agentToken });
    agentOnB = new FleetClient({ url: b.url, token: agentToken });
    approver = new FleetClient({ url: b.url, token: approverToken });
  });

  afterAll(async () => {
    await Promise.all([agent?.close(), agentOnB?.close(), approver?.close()]);
    await fleet?.stopAll();
    redis?.disconnect();
    await cluster?.stop();
  });

  it('runs calls of every tier and host pool, batched, each exactly once', async () => {
    const tools = ['echo', 'embedded_echo', 'host_echo', 'pool_echo', 'count', 'host_count'];
    // Eight calls per tool in one turn: each queue's calls leave as one batch job whose records lie in eight slots.
    const calls = tools.flatMap((name) => Array.from({ length: 8 }, (_, i) => ({ name, id: `${name}-${i}-${randomUUID()}` })));
    const results = await Promise.all(calls.map(({ name, id }) => agent.call(name, name === 'count' ? { n: 1 } : { hello: name }, { id, timeoutMs: 20_000 })));
    results.forEach((result, i) => expect(result, calls[i]!.id).toMatchObject({ name: calls[i]!.name, isError: false }));
    for (const { name, id } of calls) if (name === 'count' || name === 'host_count') expect(await runs(id)).toBe(1);
    completed.push(...calls.map((c) => c.id));
    // The records spread by call id: they sit on more than one shard.
    const shards = new Set(await Promise.all(calls.map(async ({ id }) => slotOwner(Number(await redis.cluster('KEYSLOT', keys.call('platform', id)))))));
    expect(shards.size).toBeGreaterThan(1);
  });

  it('runs a call a person approved on another dispatcher, once; the waiting agent gets the result', async () => {
    const id = `approve-${randomUUID()}`;
    const result = agent.call('confirm_echo', { text: 'hello' }, { id, timeoutMs: 20_000 });
    await vi.waitFor(async () => expect((await approver.approvals()).map((a) => a.id)).toContain(id), { timeout: 10_000, interval: 25 });
    expect(await runs(id)).toBe(0);
    expect(await approver.decide(id, { decision: 'approve' })).toEqual({ id, status: 'queued' });
    expect(await result).toMatchObject({ isError: false, structuredContent: { echo: 'hello', runs: 1 } });
    completed.push(id);
  });

  it('cancels a running call from another dispatcher: its handler sees the signal and it ends cancelled', async () => {
    const id = `cancel-${randomUUID()}`;
    expect((await agent.submit('block', {}, { id })).status).toBe('queued');
    expect(await redis.blpop(`${prefix}:test:started:{${id}}`, 10)).not.toBeNull();
    const cancelled = await agentOnB.cancel(id);
    expect(cancelled).toMatchObject({ status: 'cancelled', result: { error: { code: 'CANCELLED' } } });
    expect(await redis.get(`${prefix}:test:aborted:{${id}}`)).toContain('cancelled');
    expect((await agent.get(id)).status).toBe('cancelled');
    expect(await runs(id)).toBe(1);
  });

  it('passes progress on to a dispatcher watching the call, step by step, then the result', async () => {
    const id = `progress-${randomUUID()}`;
    expect((await agent.submit('stepped', { steps: 2 }, { id })).status).not.toBe('failed');
    for (const step of [1, 2]) {
      expect(await progressed(agentOnB, id, step)).toMatchObject({ status: 'running', progress: { progress: step, total: 2, message: `step ${step}` } });
      // The tool waits on its release list, on the cluster like everything else.
      await redis.lpush(`${prefix}:test:release:{${id}}`, '1');
    }
    expect(await agentOnB.get(id, { waitMs: 10_000 })).toMatchObject({ status: 'completed', result: { structuredContent: { steps: 2 } } });
    completed.push(id);
  });

  it('reads the audit stream back: one admission and exactly one completion per call', async () => {
    expect(completed.length).toBeGreaterThan(0);
    for (const id of completed) {
      // The worker writes its outcome entry after the reply has gone out: wait for it.
      const entries = await vi.waitFor(
        async () => {
          const found = await audit(`callId=${encodeURIComponent(id)}`);
          expect(found.some((e) => e['decision'] === 'completed')).toBe(true);
          return found;
        },
        { timeout: 10_000, interval: 25 },
      );
      expect(entries.filter((e) => e['decision'] === 'completed'), id).toHaveLength(1);
      expect(entries.filter((e) => e['decision'] === 'approved'), id).toHaveLength(1);
    }
  });

  it("keeps each queue's keys in its hash tag's slot, the queues in different slots and on more than one shard", async () => {
    const slots = new Map<string, number>();
    for (const { tier, pool } of queues) slots.set(queueName(prefix, tier, pool), Number(await redis.cluster('KEYSLOT', queueName(prefix, tier, pool))));
    expect(new Set(slots.values()).size).toBe(queues.length);
    expect(new Set(await Promise.all([...slots.values()].map(slotOwner))).size).toBeGreaterThan(1);
    // Every key of every queue, read from the shard that holds it.
    const found = new Map<string, string[]>();
    for (const node of redis.nodes('master')) {
      for (const key of await node.keys(`${prefix}:{${prefix}.*`)) {
        // A lane's queues are its tool packs' (`<lane queue>.<pack>`): all under the lane's hash tag.
        const name = [...slots.keys()].find((q) => key.startsWith(`${prefix}:${q}.`));
        if (name !== undefined) found.set(name, [...(found.get(name) ?? []), key]);
      }
    }
    for (const [name, slot] of slots) {
      const queueKeys = found.get(name) ?? [];
      expect(queueKeys.length, name).toBeGreaterThan(0);
      for (const key of queueKeys) expect(Number(await redis.cluster('KEYSLOT', key)), key).toBe(slot);
    }
    // The lanes' catalog entries share one slot, whatever the lane.
    const catalogSlots = await Promise.all(queues.map(({ tier, pool }) => redis.cluster('KEYSLOT', keys.catalogDefinitions(laneOf(tier, pool)))));
    expect(new Set(catalogSlots).size).toBe(1);
    // What operators see (GET /v1/queues): every queue, its live worker, nothing failed.
    const stats = (await approver.queues()).queues;
    expect(stats.map((q) => q.queue.slice(0, q.queue.lastIndexOf('}') + 1)).sort()).toEqual([...slots.keys()].sort());
    for (const q of stats) expect(q, q.queue).toMatchObject({ workers: 1, failed: 0 });
  });

  it('refused no command with CROSSSLOT and redirected none with MOVED or ASK', async () => {
    for (const p of processes) expect(p.output()).not.toMatch(/CROSSSLOT|MOVED|\bASK \d|same slot/);
    // A refusal inside a worker's processing fails its job without a log line: no job may have failed.
    for (const { queue: name } of (await approver.queues()).queues) {
      const queue = `${prefix}:${name}`;
      const failed = await redis.zrange(`${queue}:failed`, 0, -1);
      const reasons = await Promise.all(failed.map((job) => redis.hget(`${queue}:${job}`, 'failedReason')));
      expect(reasons, queue).toEqual([]);
    }
    for (const node of redis.nodes('master')) {
      const errors = await node.info('errorstats');
      expect(errors, `node ${node.options.port}`).not.toMatch(/errorstat_(CROSSSLOT|MOVED|ASK):/);
    }
  });
});
