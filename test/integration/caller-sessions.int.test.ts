import { randomUUID } from 'node:crypto';
import { ToolDefinition } from '@forge-fleet/shared';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CallerSessions, Catalog, directPackOf, fleetKeys, isDirectPack, laneQueueName, openQueue, packOf } from '@forge-fleet/store';
import { pino } from 'pino';
import { LapsedPacks } from '../../apps/worker/src/pools/lapsed-packs.js';
import { redisUrl } from '../fixtures/redis.js';

/**
 * Which worker holds each caller's session with a `perCaller` MCP server
 * (CallerSessions), and the worker's own pack that calls are sent on to it
 * by, against a real Redis.
 */

const prefix = `cs${randomUUID().slice(0, 8)}`;
const keys = fleetKeys(prefix);
const L = 'host';
let redis: Redis;
let sessions: CallerSessions;

const A = { process: 'worker-a', queue: `{${prefix}.host}.p1.wa` };
const A2 = { process: 'worker-a', queue: `{${prefix}.host}.p2.wa` };
const B = { process: 'worker-b', queue: `{${prefix}.host}.p1.wb` };

beforeAll(() => {
  redis = new Redis(redisUrl());
  sessions = new CallerSessions(redis, keys);
});

afterAll(async () => {
  const leftovers = await redis.keys(`${prefix}:*`);
  if (leftovers.length > 0) await redis.del(...leftovers);
  await redis.quit();
});

describe('CallerSessions', () => {
  it('gives a caller to the first worker that claims it, and tells the others where it is', async () => {
    expect(await sessions.place(L, 'memory', 'alice', A, 10_000, true)).toEqual({ here: true });
    expect(await sessions.place(L, 'memory', 'alice', B, 10_000, true)).toEqual({ here: false, queue: A.queue });
    // Per server and per caller.
    expect(await sessions.place(L, 'memory', 'bob', B, 10_000, true)).toEqual({ here: true });
    expect(await sessions.place(L, 'browser', 'alice', B, 10_000, true)).toEqual({ here: true });
  });

  it('claims nothing when asked not to, but still says where a held session is', async () => {
    expect(await sessions.place(L, 'memory', 'carol', B, 10_000, false)).toBeUndefined();
    expect(await redis.exists(keys.callerSession(L, 'memory', 'carol'))).toBe(0);
    await sessions.place(L, 'memory', 'carol', A, 10_000, true);
    expect(await sessions.place(L, 'memory', 'carol', B, 10_000, false)).toEqual({ here: false, queue: A.queue });
  });

  it("moves a process's sessions to its new generation's queue, which a release of the old one leaves alone", async () => {
    await sessions.place(L, 'memory', 'dave', A, 10_000, true);
    await sessions.renew(L, 'memory', ['dave'], A2, 10_000);
    expect(await sessions.place(L, 'memory', 'dave', B, 10_000, true)).toEqual({ here: false, queue: A2.queue });
    await sessions.release(L, 'memory', ['dave'], A);
    expect(await sessions.place(L, 'memory', 'dave', B, 10_000, true)).toEqual({ here: false, queue: A2.queue });
    await sessions.release(L, 'memory', ['dave'], A2);
    expect(await sessions.place(L, 'memory', 'dave', B, 10_000, true)).toEqual({ here: true });
  });

  it('lets a lapsed hold be claimed by another worker', async () => {
    await sessions.place(L, 'memory', 'erin', A, 200, true);
    expect(await sessions.place(L, 'memory', 'erin', B, 10_000, true)).toEqual({ here: false, queue: A.queue });
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect(await sessions.place(L, 'memory', 'erin', B, 10_000, true)).toEqual({ here: true });
  });

  it('keeps any caller name apart from every other key, and from other callers', async () => {
    const odd = ['a:b', 'a', 'a%3Ab', '', 'x|y', '{tag}', 'with space'];
    for (const caller of odd) expect(await sessions.place(L, 'odd', caller, odd.indexOf(caller) % 2 === 0 ? A : B, 10_000, true), caller).toEqual({ here: true });
    const made = odd.map((caller) => keys.callerSession(L, 'odd', caller));
    expect(new Set(made).size).toBe(odd.length);
    for (const key of made) expect(key.startsWith(`${prefix}:{${prefix}.catalog}:${L}:sessions:`)).toBe(true);
  });
});

describe("a worker's own pack", () => {
  const definitions = [ToolDefinition.parse({ name: 'memory.read_graph', description: 'reads', parameters: { type: 'object' }, tier: 'host' })];

  it("is announced beside the worker's pack, listed for re-homing but never as where a tool's calls go", async () => {
    const catalog = new Catalog(redis, keys);
    await catalog.announce(L, 'w1', definitions, 10_000);
    await catalog.announce(L, 'w1', definitions, 10_000, { direct: true });
    const shared = packOf(definitions);
    const own = directPackOf(shared, 'w1');
    expect(isDirectPack(own.id)).toBe(true);
    expect(isDirectPack(shared.id)).toBe(false);
    const snapshot = await catalog.snapshot();
    expect(snapshot.packs.map((p) => [p.id, p.direct, p.liveWorkers]).sort()).toEqual([[own.id, true, 1], [shared.id, false, 1]].sort());
    const entry = snapshot.entries.get('memory.read_graph');
    expect(entry?.packs.map((p) => p.id)).toEqual([shared.id]);
    expect(entry?.liveWorkers).toBe(1);
    await catalog.withdraw(L, 'w1', definitions, undefined, { direct: true });
    expect((await catalog.snapshot()).packs.map((p) => p.liveWorkers)).toEqual([0, 0]);
  });

  it('is pruned from the catalog once it has stayed lapsed past the grace, its queue empty, and never while a worker holds it or its queue holds a call', async () => {
    const catalog = new Catalog(redis, keys);
    const log = pino({ level: 'silent' });
    const shared = packOf(definitions);
    const gone = directPackOf(shared, 'w-gone');
    const busy = directPackOf(shared, 'w-busy');
    const live = directPackOf(shared, 'w-live');
    for (const worker of ['w-gone', 'w-busy']) {
      await catalog.announce(L, worker, definitions, 10_000, { direct: true });
      await catalog.withdraw(L, worker, definitions, undefined, { direct: true, toolsOnly: false });
    }
    await catalog.announce(L, 'w-live', definitions, 60_000, { direct: true });
    // A call left in the busy one's queue (another worker sent it on): dispatchers must still find it there to re-home it.
    const queue = openQueue(redis, prefix, `${laneQueueName(prefix, L)}.${busy.id}`);
    await queue.add('call', { stranded: true });
    await queue.close();
    const sweep = new LapsedPacks(catalog, L, 1_000, log);
    const now = Date.now();
    expect(await sweep.sweep(now)).toEqual([]);
    // Not yet past the grace since first seen.
    expect(await sweep.sweep(now + 999)).toEqual([]);
    // The other test's withdrawn pack, lapsed too, goes with it; the busy and the live ones stay.
    const pruned = await sweep.sweep(now + 1_000);
    expect(pruned).toContain(gone.id);
    expect(pruned).not.toContain(busy.id);
    expect(pruned).not.toContain(live.id);
    const ids = (await catalog.snapshot()).packs.map((p) => p.id);
    expect(ids).toEqual(expect.arrayContaining([shared.id, busy.id, live.id]));
    expect(ids).not.toContain(gone.id);
    expect(await redis.exists(keys.catalogPackLeases(L, gone.id))).toBe(0);
    // A worker that was only cut off comes back: its renewal announces its pack again in full.
    await catalog.renew(L, 'w-gone', definitions, 10_000, { direct: true });
    expect((await catalog.snapshot()).packs.map((p) => p.id)).toContain(gone.id);
  });
});

describe('a changed definition of a tool other workers serve', () => {
  const before = [ToolDefinition.parse({ name: 'dz.w', description: 'writes', parameters: { type: 'object' }, tier: 'host' })];
  const after = [ToolDefinition.parse({ name: 'dz.w', description: 'writes, destructively', parameters: { type: 'object' }, tier: 'host' })];

  it('is refused while another live worker serves the old one, and taken over when the announcement says so', async () => {
    const catalog = new Catalog(redis, keys);
    await catalog.announce(L, 'a', before, 10_000);
    await expect(catalog.announce(L, 'b', after, 10_000)).rejects.toThrow(/already served with a different definition/);
    await catalog.announce(L, 'b', after, 10_000, { takeOver: true });
    const entry = (await catalog.snapshot()).entries.get('dz.w');
    expect(JSON.parse(entry!.json)).toMatchObject({ description: 'writes, destructively' });
    // Its calls go to the pack that serves it as it is now, not to the old one.
    expect(entry?.packs.map((p) => p.id)).toEqual([packOf(after).id]);
  });
});

