import { randomUUID } from 'node:crypto';
import { type CallEnvelope, type ToolResult } from '@forge-fleet/shared';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { AuditArchivist, AuditReader, CallStore, Catalog, publishReply, RedisAuditLogger, ReplyInbox, TierQueues, fleetKeys } from '@forge-fleet/store';
import { redisUrl } from '../fixtures/redis.js';
import { until } from '../fixtures/wait.js';

const prefix = `st${randomUUID().slice(0, 8)}`;
const keys = fleetKeys(prefix);
/** These calls' lane. */
const L = 'platform';
let redis: Redis;

/** The replies about call `id` on dispatcher `dispatcher`'s reply list of lane L, oldest first. */
async function told(dispatcher: string, id: string): Promise<unknown[]> {
  const lines = await redis.lrange(keys.replies(L, dispatcher), 0, -1);
  return lines.map((line) => JSON.parse(line) as { id: string }).filter((m) => m.id === id).reverse();
}
let store: CallStore;

const envelope = (id: string, extra: Partial<CallEnvelope> = {}): CallEnvelope => ({
  v: 1,
  call: { id, name: 'echo', arguments: {} },
  tier: 'platform',
  replyTo: 'd1',
  enqueuedAt: Date.now(),
  ...extra,
});
const result = (id: string, content = 'ok'): ToolResult => ({ toolCallId: id, name: 'echo', content, isError: false });
const create = (id: string, extra: Partial<CallEnvelope> = {}) => store.create({ id, lane: L, name: 'echo', status: 'queued', replyTo: 'd1', envelope: envelope(id, extra) });

beforeAll(() => {
  redis = new Redis(redisUrl());
  store = new CallStore(redis, keys, 60_000);
});

afterAll(async () => {
  const leftovers = await redis.keys(`${prefix}:*`);
  if (leftovers.length > 0) await redis.del(...leftovers);
  redis.disconnect();
});

describe('CallStore (Lua transitions on a real Redis)', () => {
  it('creates a record once; a second create returns the first', async () => {
    const id = randomUUID();
    expect(await create(id)).toEqual({ created: true });
    const again = await create(id);
    expect(again.created).toBe(false);
    expect(again.created === false && again.existing).toMatchObject({ id, status: 'queued', name: 'echo', replyTo: 'd1', starts: 0 });
    expect(await redis.pttl(keys.call(L, id))).toBeGreaterThan(0);
  });

  it('keeps a record in its lane, finds it by id alone, and refuses the id in every other lane', async () => {
    const id = randomUUID();
    await store.create({ id, lane: 'host.payments', name: 'echo', status: 'queued', replyTo: 'd1', envelope: envelope(id) });
    expect(await redis.exists(keys.call('host.payments', id))).toBe(1);
    expect(await store.laneOf(id)).toBe('host.payments');
    expect(await store.get(id)).toMatchObject({ id, lane: 'host.payments', status: 'queued' });
    expect(await store.getIn(L, id)).toBeUndefined();
    const again = await store.create({ id, lane: L, name: 'echo', status: 'queued', replyTo: 'd2', envelope: envelope(id) });
    expect(again).toMatchObject({ created: false, existing: { lane: 'host.payments', replyTo: 'd1' } });
    expect(await redis.exists(keys.call(L, id))).toBe(0);
  });

  it('counts each run of an envelope on its execution record in the start step: a resent claim once, a skipped start not at all', async () => {
    const id = randomUUID();
    await create(id);
    const keepUntil = Date.now() + 60_000;
    const claim = (runId: string) => ({ mac: 'mac-1', runId, keepUntil });
    expect(await store.start(L, id, 'w1', '', claim('w1:a'))).toEqual({ outcome: 'started', starts: 1, runs: 1 });
    // The same run sent again (its answer lost in an outage): counted once.
    expect(await store.start(L, id, 'w1', '', claim('w1:a'))).toMatchObject({ outcome: 'redelivered', runs: 1 });
    // The record set back to queued (what a dispatcher's user can do) and the job sent again: a second run.
    await redis.hset(keys.call(L, id), 'status', 'queued');
    expect(await store.start(L, id, 'w2', '', claim('w2:b'))).toMatchObject({ outcome: 'started', runs: 2 });
    // A finished call is not taken, and its envelope's count stays.
    await redis.hset(keys.call(L, id), 'status', 'completed');
    expect(await store.start(L, id, 'w3', '', claim('w3:c'))).toEqual({ outcome: 'final', starts: 0, runs: 0 });
    expect(await redis.hlen(keys.executions(L, id, 'mac-1'))).toBe(2);
    expect(Math.abs((await redis.pexpiretime(keys.executions(L, id, 'mac-1'))) - Math.ceil(keepUntil))).toBeLessThanOrEqual(1);
    // Another envelope of the same call (a new submission's) counts on its own.
    await redis.hset(keys.call(L, id), 'status', 'queued');
    expect(await store.start(L, id, 'w4', '', { mac: 'mac-2', runId: 'w4:d', keepUntil })).toMatchObject({ outcome: 'started', runs: 1 });
  });

  it('starts a queued call, and reports a second start as a redelivery', async () => {
    const id = randomUUID();
    await create(id);
    expect(await store.start(L, id, 'w1')).toEqual({ outcome: 'started', starts: 1, runs: 0 });
    expect(await store.start(L, id, 'w2')).toEqual({ outcome: 'redelivered', starts: 2, runs: 0 });
    expect((await store.get(id))?.status).toBe('running');
  });

  it('ends exactly once, telling the submitter and the watchers once each', async () => {
    const id = randomUUID();
    await create(id);
    await store.start(L, id, 'w1');
    await store.watch(id, 'd2');
    await store.watch(id, 'd1'); // the submitter is not added as a watcher
    expect(await store.end(L, id, 'completed', result(id))).toBe(true);
    expect(await store.end(L, id, 'failed', result(id, 'second'))).toBe(false);
    expect(await told('d1', id)).toEqual([{ v: 1, id, status: 'completed', result: result(id) }]);
    expect(await told('d2', id)).toEqual([{ v: 1, id, status: 'completed', result: result(id) }]);
    const record = await store.get(id);
    expect(record).toMatchObject({ status: 'completed', result: { content: 'ok' } });
    expect(await redis.exists(keys.watchers(L, id))).toBe(0);
  });

  it('refuses to start what is final, cancelled, expired or missing', async () => {
    const done = randomUUID();
    await create(done);
    await store.end(L, done, 'completed', result(done));
    expect((await store.start(L, done, 'w')).outcome).toBe('final');
    expect((await store.start(L, randomUUID(), 'w')).outcome).toBe('missing');
    const expired = randomUUID();
    await create(expired, { deadline: Date.now() - 1 });
    expect((await store.start(L, expired, 'w')).outcome).toBe('expired');
  });

  it('cancels a queued call at once and flags a running one', async () => {
    const queued = randomUUID();
    await create(queued);
    expect(await store.cancel(L, queued, result(queued, 'cancelled'))).toEqual({ state: 'cancelled' });
    expect(await told('d1', queued)).toEqual([{ v: 1, id: queued, status: 'cancelled', result: result(queued, 'cancelled') }]);
    expect((await store.start(L, queued, 'w')).outcome).toBe('final');

    const running = randomUUID();
    await create(running);
    await store.start(L, running, 'w');
    expect(await store.cancel(L, running, result(running))).toEqual({ state: 'running' });
    expect(await store.cancel(L, randomUUID(), result('x'))).toEqual({ state: 'missing' });
  });

  it('puts a running call back to queued for a retry', async () => {
    const id = randomUUID();
    await create(id);
    await store.start(L, id, 'w');
    expect(await store.requeue(L, id)).toBe(true);
    expect(await store.start(L, id, 'w')).toEqual({ outcome: 'started', starts: 2, runs: 0 });
  });

  it('keeps progress only from the worker running the call, names who to tell, and clears it for a retry', async () => {
    const id = randomUUID();
    await create(id);
    const progress = { progress: 1, total: 2, message: 'half', at: Date.now() };
    // Not started: nobody may report on it.
    expect(await store.progress(L, id, 'w1', progress)).toBeUndefined();
    await store.start(L, id, 'w1');
    await store.watch(id, 'd2');
    expect(await store.progress(L, id, 'w2', progress)).toBeUndefined();
    expect(await store.progress(L, id, 'w1', progress)).toEqual(['d1', 'd2']);
    expect((await store.get(id))?.progress).toEqual(progress);
    expect(await store.requeue(L, id)).toBe(true);
    expect((await store.get(id))?.progress).toBeUndefined();
    await store.start(L, id, 'w1');
    await store.progress(L, id, 'w1', progress);
    // A worker lost mid-call: the run that takes over starts with none.
    expect((await store.start(L, id, 'w3')).outcome).toBe('redelivered');
    expect((await store.get(id))?.progress).toBeUndefined();
    await store.end(L, id, 'completed', result(id));
    expect(await store.progress(L, id, 'w3', progress)).toBeUndefined();
  });

  it('skips a job whose submission token is not the record\'s', async () => {
    const id = randomUUID();
    await create(id, { token: 'first' });
    expect((await store.start(L, id, 'w', 'second')).outcome).toBe('superseded');
    expect((await store.get(id))?.status).toBe('queued');
    expect(await store.start(L, id, 'w', 'first')).toEqual({ outcome: 'started', starts: 1, runs: 0 });
  });

  it('pushes the submitter\'s reply in the ending step, and tells the others once each', async () => {
    const id = randomUUID();
    await create(id);
    await store.start(L, id, 'w1');
    await store.watch(id, 'd2');
    expect(await store.end(L, id, 'completed', result(id), { replyTo: 'd1' })).toBe(true);
    expect(await told('d1', id)).toEqual([{ v: 1, id, status: 'completed', result: result(id) }]);
    expect(await told('d2', id)).toEqual([{ v: 1, id, status: 'completed', result: result(id) }]);
    expect(await redis.pttl(keys.replies(L, 'd1'))).toBeGreaterThan(0);
    // A job naming another submitter than the record's: the record's submitter is told, the named one is not.
    const other = randomUUID();
    await create(other);
    expect(await store.end(L, other, 'completed', result(other), { replyTo: 'd9' })).toBe(true);
    expect(await told('d1', other)).toHaveLength(1);
    expect(await redis.exists(keys.replies(L, 'd9'))).toBe(0);
  });

  it('withdraws a queued call only under its own token and before any start', async () => {
    const id = randomUUID();
    await create(id, { token: 't1' });
    expect(await store.withdraw(L, id, 't2')).toBe(false);
    expect(await store.withdraw(L, id, 't1')).toBe(true);
    expect(await store.get(id)).toBeUndefined();
    const started = randomUUID();
    await create(started, { token: 't1' });
    await store.start(L, started, 'w', 't1');
    expect(await store.withdraw(L, started, 't1')).toBe(false);
  });

  it('finishes only from the given status when asked to', async () => {
    const id = randomUUID();
    await create(id);
    await store.start(L, id, 'w');
    expect(await store.end(L, id, 'failed', result(id), { onlyFrom: 'queued' })).toBe(false);
    expect((await store.get(id))?.status).toBe('running');
  });

  it('starts and finishes the calls of one turn in two script runs each — the first call\'s at once, the rest together — every call with its own answer or error', async () => {
    // A connection of its own, so the script runs counted are this test's.
    const own = new Redis(redisUrl());
    const batched = new CallStore(own, keys, 60_000);
    try {
      const ids = Array.from({ length: 12 }, () => randomUUID());
      await Promise.all(ids.map((id) => create(id)));
      const missing = randomUUID();
      // Not a hash: this call's part of the script fails, the others' must not.
      const broken = randomUUID();
      await redis.set(keys.call(L, broken), 'not a record', 'PX', 60_000);
      // The scripts in Redis's cache first (a fresh server answers the first EVALSHA of each with NOSCRIPT, then an EVAL).
      const warm = Array.from({ length: 3 }, () => randomUUID());
      await Promise.all(warm.map((id) => create(id)));
      await Promise.all(warm.map((id) => batched.start(L, id, 'w1')));
      await Promise.all(warm.map((id) => batched.end(L, id, 'completed', result(id))));
      // Every command reaches the socket through sendCommand, alone or from a pipeline: the script runs and their key counts.
      const sent = vi.spyOn(own, 'sendCommand');
      const runs = () => sent.mock.calls.filter(([command]) => command.name === 'evalsha').map(([command]) => Number(command.args[1]));

      const starting = Promise.allSettled([...ids, missing, broken].map((id) => batched.start(L, id, 'w1')));
      // Nothing was in flight: the first start is sent at once, before this turn ends; the others wait for its end.
      expect(runs()).toEqual([1]);
      const started = await starting;
      expect(runs()).toEqual([1, ids.length + 1]);
      expect(started.slice(0, ids.length)).toEqual(ids.map(() => ({ status: 'fulfilled', value: { outcome: 'started', starts: 1, runs: 0 } })));
      expect(started[ids.length]).toEqual({ status: 'fulfilled', value: { outcome: 'missing', starts: 0, runs: 0 } });
      const refused = started[ids.length + 1];
      expect(refused?.status).toBe('rejected');
      expect(refused?.status === 'rejected' && String(refused.reason)).toContain('WRONGTYPE');

      await store.watch(ids[1]!, 'd2');
      await store.end(L, ids[2]!, 'failed', result(ids[2]!, 'first'));
      await redis.del(keys.replies(L, 'd1'));
      sent.mockClear();
      const finishing = Promise.all(ids.map((id) => batched.end(L, id, 'completed', result(id, `done ${id}`), { replyTo: 'd1' })));
      // A finish's keys: the record, its watchers, the submitter's reply list.
      expect(runs()).toEqual([3]);
      const finished = await finishing;
      expect(runs()).toEqual([3, 3 * (ids.length - 1)]);
      expect(finished).toEqual(ids.map((_, i) => i !== 2));
      expect(await told('d2', ids[1]!)).toHaveLength(1);
      const records = await Promise.all(ids.map((id) => store.get(id)));
      records.forEach((record, i) => {
        if (i === 2) expect(record).toMatchObject({ status: 'failed', result: { content: 'first' } });
        else expect(record).toMatchObject({ status: 'completed', result: { content: `done ${ids[i]}` } });
      });
      // Every call but the one already ended pushed its reply to the submitter's list, in order.
      const pushed = (await redis.lrange(keys.replies(L, 'd1'), 0, -1)).map((line) => (JSON.parse(line) as { id: string }).id);
      expect(pushed.reverse()).toEqual(ids.filter((_, i) => i !== 2));
    } finally {
      await redis.del(keys.replies(L, 'd1'));
      own.disconnect();
    }
  });
});

describe('the audit stream', () => {
  it('appends the entries of one turn with one RPUSH, files them in order with their writer, each readable', async () => {
    const own = new Redis(redisUrl());
    const audit = new RedisAuditLogger(own, keys, 'dispatcher');
    const archivist = new AuditArchivist({ redis: own, keys, lanes: () => [L], log: { error: () => {} } });
    try {
      const ids: string[] = Array.from({ length: 10 }, () => randomUUID());
      const pushes = vi.spyOn(own, 'rpush');
      await Promise.all(ids.map((callId, i) => audit.record({ at: new Date().toISOString(), callId, tool: 'echo', decision: i % 2 === 0 ? 'approved' : 'completed', scopeAtDispatch: 'test' })));
      expect(pushes).toHaveBeenCalledTimes(1);
      // Written, not yet filed: the inbox holds them until the keeper moves them.
      expect(await own.llen(keys.auditInbox('dispatcher'))).toBe(10);
      const read = await new AuditReader(own, keys, archivist).query({ limit: 100 });
      expect(await own.llen(keys.auditInbox('dispatcher'))).toBe(0);
      // Newest first: the turn's entries in the order they were recorded, reversed.
      expect(read.filter((e) => ids.includes(e.callId ?? '')).map((e) => e.callId)).toEqual([...ids].reverse());
      expect(new Set(read.filter((e) => ids.includes(e.callId ?? '')).map((e) => e.writer))).toEqual(new Set(['dispatcher']));
      // What a compromised writer pushes that is not an entry is filed as `invalid`, never read as one, never lost.
      await own.rpush(keys.auditInbox(L), 'no newline here', 'audit\n{"callId":"lane-entry","tool":"echo"}');
      const after = await new AuditReader(own, keys, archivist).query({ limit: 100 });
      expect(after.filter((e) => e.callId === 'lane-entry').map((e) => e.writer)).toEqual([L]);
      const raw = await own.xrevrange(keys.audit, '+', '-', 'COUNT', 5);
      expect(raw.some(([, f]) => f.includes('invalid') && f.includes('no newline here'))).toBe(true);
    } finally {
      await own.del(keys.audit, keys.auditInbox('dispatcher'), keys.auditInbox(L));
      own.disconnect();
    }
  });

  it('files entries that many writers push while several keepers drain, each exactly once', async () => {
    const own = new Redis(redisUrl());
    const keepers = [0, 1, 2].map(() => new AuditArchivist({ redis: own, keys, lanes: () => [L], log: { error: () => {} } }));
    try {
      const writers = [new RedisAuditLogger(own, keys, 'dispatcher'), new RedisAuditLogger(own, keys, L)];
      const ids: string[] = Array.from({ length: 3000 }, () => randomUUID());
      const writing = Promise.all(ids.map((callId, i) => writers[i % 2]!.record({ at: new Date().toISOString(), callId, tool: 'echo', decision: 'approved', scopeAtDispatch: 'test' })));
      const draining = Promise.all(keepers.map(async (k) => { for (let i = 0; i < 20; i++) await k.drain(); }));
      await Promise.all([writing, draining]);
      await keepers[0]!.drain();
      const filed = (await own.xrange(keys.audit, '-', '+')).map(([, f]) => (JSON.parse(f[f.indexOf('entry') + 1]!) as { callId: string }).callId);
      expect(filed.length).toBe(ids.length);
      expect(new Set(filed)).toEqual(new Set(ids));
    } finally {
      await own.del(keys.audit, keys.auditInbox('dispatcher'), keys.auditInbox(L));
      own.disconnect();
    }
  });
  it('keeps looking while started: an idle keeper backs off, and still files a worker\'s entry by itself after a quiet spell', async () => {
    const own = new Redis(redisUrl());
    const archivist = new AuditArchivist({ redis: own, keys, lanes: () => [L], log: { error: () => {} } });
    const looks = vi.spyOn(own, 'evalsha');
    try {
      await archivist.start();
      // Idle for 1.5 s: at a fixed 25 ms a keeper looked ~60 times; backing off it looks about 8 times (fewer on a slow machine).
      await new Promise((resolve) => setTimeout(resolve, 1500));
      expect(looks.mock.calls.length).toBeLessThan(20);
      // A worker writes (no reader asks, no soon() from this process): the keeper's own next look files it.
      const callId = randomUUID();
      await new RedisAuditLogger(own, keys, L).record({ at: new Date().toISOString(), callId, tool: 'echo', decision: 'completed', scopeAtDispatch: 'test' });
      const filed = async (): Promise<boolean> => (await own.xrange(keys.audit, '-', '+')).some(([, f]) => f.join('\n').includes(callId));
      await until("the worker's entry in the audit stream", filed, { timeoutMs: 10_000 });
      expect(await filed()).toBe(true);
      expect(await own.llen(keys.auditInbox(L))).toBe(0);
    } finally {
      archivist.stop();
      await own.del(keys.audit, keys.auditInbox('dispatcher'), keys.auditInbox(L));
      own.disconnect();
    }
  });

  it('gives a reader who asks during a drain every entry written before it asked, not the drain under way', async () => {
    const keeperConnection = new Redis(redisUrl());
    const writerConnection = new Redis(redisUrl());
    const archivist = new AuditArchivist({ redis: keeperConnection, keys, lanes: () => [L], log: { error: () => {} } });
    const reader = new AuditReader(keeperConnection, keys, archivist);
    const writer = new RedisAuditLogger(writerConnection, keys, L);
    try {
      const missed: string[] = [];
      for (let i = 0; i < 200; i++) {
        // A drain under way (as the keeper's own look would be), then an entry written while it runs, then a read.
        const underWay = archivist.drain();
        const callId = randomUUID();
        await writer.record({ at: new Date().toISOString(), callId, tool: 'echo', decision: 'completed', scopeAtDispatch: 'test' });
        const found = await reader.query({ callId, limit: 1 });
        if (found.length !== 1) missed.push(callId);
        await underWay;
      }
      expect(missed).toEqual([]);
    } finally {
      await keeperConnection.del(keys.audit, keys.auditInbox('dispatcher'), keys.auditInbox(L));
      keeperConnection.disconnect();
      writerConnection.disconnect();
    }
  });
});

describe('reply lists', () => {
  it('lets the waiters of a read answer before it sends its next read', async () => {
    const blocking = new Redis(redisUrl(), { maxRetriesPerRequest: null });
    const inbox = new ReplyInbox(blocking, keys, 'd-order', { lanes: [L] });
    const reads = vi.spyOn(blocking, 'blmpop');
    inbox.start();
    try {
      const id = randomUUID();
      // What a request does with its reply: a few awaits (a stream's line, a response), then its write.
      const answered = inbox.wait(id, 5000).then(async (reply) => {
        for (let i = 0; i < 5; i++) await Promise.resolve();
        return { reply, readsWhenAnswered: reads.mock.calls.length };
      });
      await until('the first read', () => reads.mock.calls.length === 1);
      await publishReply(redis, keys, L, ['d-order'], { v: 1, id, status: 'completed', result: result(id) });
      const { reply, readsWhenAnswered } = await answered;
      expect(reply).toMatchObject({ id, status: 'completed' });
      // The read that brought the reply is the only one sent yet: the next one went after the answer.
      expect(readsWhenAnswered).toBe(1);
      await until('the next read', () => reads.mock.calls.length === 2);
    } finally {
      await inbox.stop();
    }
  });

  it('delivers a pushed result to the request waiting for it, and only to it', async () => {
    const blocking = new Redis(redisUrl(), { maxRetriesPerRequest: null });
    const inbox = new ReplyInbox(blocking, keys, 'd-inbox', { lanes: [L, 'host'] });
    inbox.start();
    try {
      const id = randomUUID();
      const fromHost = randomUUID();
      const waiting = inbox.wait(id, 5000);
      const hostWaiting = inbox.wait(fromHost, 5000);
      const other = inbox.wait(randomUUID(), 100);
      expect(inbox.waiting).toBe(3);
      await publishReply(redis, keys, L, ['d-inbox', 'd-inbox'], { v: 1, id, status: 'completed', result: result(id) });
      expect(await waiting).toMatchObject({ id, status: 'completed' });
      // Each lane has its own list; the inbox reads them all.
      await publishReply(redis, keys, 'host', ['d-inbox'], { v: 1, id: fromHost, status: 'completed', result: result(fromHost) });
      expect(await hostWaiting).toMatchObject({ id: fromHost, status: 'completed' });
      expect(await other).toBeUndefined();
      expect(inbox.waiting).toBe(0);
      // Progress goes to the call's progress listeners and resolves no waiter.
      const running = randomUUID();
      const stillWaiting = inbox.wait(running, 5000);
      const heard: unknown[] = [];
      const unsubscribe = inbox.onProgress(running, (p) => heard.push(p));
      const progress = { progress: 2, total: 4, at: 1 };
      await publishReply(redis, keys, L, ['d-inbox'], { v: 1, id: running, progress });
      await publishReply(redis, keys, L, ['d-inbox'], { v: 1, id: running, status: 'completed', result: result(running) });
      expect(await stillWaiting).toMatchObject({ status: 'completed' });
      expect(heard).toEqual([progress]);
      unsubscribe();
    } finally {
      await inbox.stop();
    }
  });
});

describe('TierQueues: records and jobs in one write', () => {
  it('records each call, reads its pack\'s live leases and enqueues one job; a taken id is reported, not recorded twice', async () => {
    const queueConnection = new Redis(redisUrl());
    const queues = new TierQueues(queueConnection, keys, 60_000);
    try {
      const catalog = new Catalog(redis, keys);
      const echo = { name: 'echo', description: '', parameters: { type: 'object', properties: {} }, tier: 'platform' as const, retryable: false, speculatable: false, requiresConfirmation: false };
      await catalog.announce(L, 'wq', [echo], 10_000);
      const { pack, queue: packQueue } = catalog.packQueue(L, [echo]);
      const [a, b] = [randomUUID(), randomUUID()];
      await create(b, { token: 'earlier' });
      const submit = (id: string) => queues.submit({ id, lane: L, name: 'echo', status: 'queued', replyTo: 'd1', envelope: envelope(id, { token: `tok-${id}` }) }, { queue: packQueue, pack: pack.id });
      // Same turn: one job carries both calls.
      const [first, second] = await Promise.all([submit(a), submit(b)]);
      expect(first).toEqual({ created: true, live: 1 });
      expect(second.created).toBe(false);
      expect(await store.get(a)).toMatchObject({ status: 'queued', envelope: { token: `tok-${a}` } });
      const queue = queues.queue(packQueue);
      const [job] = await queue.getWaiting();
      expect(await queue.getWaitingCount()).toBe(1);
      expect((job!.data as { batch: CallEnvelope[] }).batch.map((e) => e.call.id)).toEqual([a, b]);
      // The resubmitted id's copy in the job cannot start: its token is not the record's.
      expect((await store.start(L, b, 'w', `tok-${b}`)).outcome).toBe('superseded');
      await catalog.withdraw(L, 'wq', [echo]);
    } finally {
      await queues.close();
      queueConnection.disconnect();
    }
  });
});

describe('the live catalog', () => {
  const def = (description: string) => ({ name: 'cat_tool', description, parameters: { type: 'object', properties: {} }, tier: 'platform' as const, retryable: false, speculatable: false, requiresConfirmation: false });

  it('counts live leases, refuses a conflicting definition while a lease lives, and forgets withdrawn workers', async () => {
    const catalog = new Catalog(redis, keys);
    await catalog.announce(L, 'w1', [def('one')], 10_000);
    await catalog.announce(L, 'w2', [def('one')], 10_000);
    expect((await catalog.snapshot()).entries.get('cat_tool')?.liveWorkers).toBe(2);
    expect(await catalog.liveWorkers(L, catalog.packQueue(L, [def('one')]).pack.id)).toBe(2);
    await expect(catalog.announce(L, 'w3', [def('two')], 10_000)).rejects.toMatchObject({ code: 'REGISTRY_ERROR' });
    await catalog.withdraw(L, 'w1', [def('one')]);
    await catalog.withdraw(L, 'w2', [def('one')]);
    expect((await catalog.snapshot()).entries.get('cat_tool')?.liveWorkers).toBe(0);
    expect(await catalog.liveWorkers(L, catalog.packQueue(L, [def('one')]).pack.id)).toBe(0);
    // With no live worker left, a new definition may replace the old one (a new deployment).
    await catalog.announce(L, 'w3', [def('two')], 10_000);
    expect(JSON.parse((await catalog.snapshot()).entries.get('cat_tool')!.json)).toMatchObject({ description: 'two' });
  });

  it('puts workers serving the same tools in one pack and others in packs of their own; a named pack takes only the same tools', async () => {
    const catalog = new Catalog(redis, keys);
    const [x, y] = [{ ...def('x'), name: 'pack_x' }, { ...def('y'), name: 'pack_y' }];
    const lane = 'host.packs';
    await catalog.announce(lane, 'w1', [x, y], 10_000);
    await catalog.announce(lane, 'w2', [y, x], 10_000);
    await catalog.announce(lane, 'w3', [y], 10_000);
    const packs = (await catalog.snapshot()).packs.filter((p) => p.lane === lane);
    expect(packs.map((p) => [[...p.tools.keys()].sort(), p.liveWorkers]).sort()).toEqual([[['pack_x', 'pack_y'], 2], [['pack_y'], 1]].sort());
    // Each pack's queue lies under the lane's hash tag; pack_y is served by both packs, pack_x by one.
    for (const p of packs) expect(p.queue.startsWith(`{${prefix}.${lane}}.`)).toBe(true);
    const snapshot = await catalog.snapshot();
    expect(snapshot.entries.get('pack_y')?.packs.length).toBe(2);
    expect(snapshot.entries.get('pack_y')?.liveWorkers).toBe(3);
    expect(snapshot.entries.get('pack_x')?.packs.map((p) => p.liveWorkers)).toEqual([2]);
    // A named pack: a second worker with other tools is refused while the first lives, and may join once it is gone.
    await catalog.announce(lane, 'n1', [x], 10_000, { pack: 'named' });
    await expect(catalog.announce(lane, 'n2', [y], 10_000, { pack: 'named' })).rejects.toMatchObject({ code: 'REGISTRY_ERROR', message: expect.stringContaining("tool pack 'named'") as unknown });
    await catalog.announce(lane, 'n1', [x], 10_000, { pack: 'named' });
    await catalog.withdraw(lane, 'n1', [x], 'named');
    await catalog.announce(lane, 'n2', [y], 10_000, { pack: 'named' });
    for (const w of ['w1', 'w2']) await catalog.withdraw(lane, w, [x, y]);
    await catalog.withdraw(lane, 'w3', [y]);
    await catalog.withdraw(lane, 'n2', [y], 'named');
  });

  it('leaves out lane names and packs it cannot read instead of failing the whole read', async () => {
    const catalog = new Catalog(redis, keys);
    const tool = { ...def('one'), name: 'skip_tool' };
    await catalog.announce(L, 'ok', [tool], 10_000);
    await redis.sadd(keys.catalogLanes, 'bogus lane*', 'host.');
    await redis.hset(keys.catalogPacks(L), 'not a pack id!', '[]', 'badjson0000000', '{');
    const snapshot = await catalog.snapshot();
    expect(snapshot.lanes).not.toContain('bogus lane*');
    expect(snapshot.skipped.join('\n')).toMatch(/bogus lane/);
    expect(snapshot.skipped.join('\n')).toMatch(/badjson0000000/);
    expect(snapshot.entries.get('skip_tool')?.liveWorkers).toBe(1);
    await redis.srem(keys.catalogLanes, 'bogus lane*', 'host.');
    await redis.hdel(keys.catalogPacks(L), 'not a pack id!', 'badjson0000000');
    await catalog.withdraw(L, 'ok', [tool]);
  });

  it("reads a lane's definitions again only when an announcement changed them, and every lane now and then", async () => {
    const catalog = new Catalog(redis, keys);
    const lane = 'host.versions';
    const tool = (description: string) => ({ ...def(description), name: 'versioned_tool', tier: 'host' as const, pool: 'versions' });
    const described = async () => (JSON.parse((await catalog.snapshot()).entries.get('versioned_tool')!.json) as { description: string }).description;
    await catalog.announce(lane, 'w1', [tool('one')], 10_000);
    expect(await described()).toBe('one');
    // A renewal of the same list leaves the version (and so the read) alone.
    const version = await redis.get(keys.catalogVersion(lane));
    await catalog.announce(lane, 'w1', [tool('one')], 10_000);
    expect(await redis.get(keys.catalogVersion(lane))).toBe(version);
    // A change written behind the catalog's back (no version bump) is not read again…
    await redis.hset(keys.catalogDefinitions(lane), 'versioned_tool', JSON.stringify(tool('behind')));
    expect(await described()).toBe('one');
    // …an announcement that changes a definition is, at the next read.
    await catalog.withdraw(lane, 'w1', [tool('one')]);
    await catalog.announce(lane, 'w2', [tool('two')], 10_000);
    expect(await redis.get(keys.catalogVersion(lane))).not.toBe(version);
    expect(await described()).toBe('two');
    // And every lane is read whatever its version every 30 reads (a worker of an older release bumps none).
    await redis.hset(keys.catalogDefinitions(lane), 'versioned_tool', JSON.stringify(tool('behind')));
    const seen = new Set<string>();
    for (let i = 0; i < 30; i++) seen.add(await described());
    expect(seen).toEqual(new Set(['two', 'behind']));
    await catalog.withdraw(lane, 'w2', [tool('two')]);
  });

  it('renews live leases without sending the definitions again, and announces in full once a lease lapsed or the list is gone', async () => {
    const catalog = new Catalog(redis, keys);
    const lane = 'host.renewals';
    const tool = (description: string) => ({ ...def(description), name: 'renewed_tool', tier: 'host' as const, pool: 'renewals' });
    const stored = async () => (JSON.parse((await redis.hget(keys.catalogDefinitions(lane), 'renewed_tool'))!) as { description: string }).description;
    const lease = async (worker: string) => Number(await redis.zscore(keys.catalogLeases(lane, 'renewed_tool'), worker));
    const list = [tool('one')];
    await catalog.announce(lane, 'w1', list, 10_000);
    const version = await redis.get(keys.catalogVersion(lane));
    const first = await lease('w1');
    // A definition changed behind the catalog's back stays changed: the renewal did not write the list again.
    await redis.hset(keys.catalogDefinitions(lane), 'renewed_tool', JSON.stringify(tool('behind')));
    await new Promise((resolve) => setTimeout(resolve, 5));
    await catalog.renew(lane, 'w1', list, 10_000);
    expect(await stored()).toBe('behind');
    expect(await lease('w1')).toBeGreaterThan(first);
    expect(await redis.get(keys.catalogVersion(lane))).toBe(version);
    // A lease gone (lapsed, or a Redis that lost it): the renewal announces in full, definition and version included.
    await redis.zrem(keys.catalogLeases(lane, 'renewed_tool'), 'w1');
    await catalog.renew(lane, 'w1', list, 10_000);
    expect(await stored()).toBe('one');
    expect(await lease('w1')).toBeGreaterThan(Date.now());
    expect(await redis.get(keys.catalogVersion(lane))).not.toBe(version);
    // So does a definition or a pack that is gone while the leases live.
    await redis.hdel(keys.catalogDefinitions(lane), 'renewed_tool');
    await catalog.renew(lane, 'w1', list, 10_000);
    expect(await stored()).toBe('one');
    await redis.del(keys.catalogPacks(lane));
    await catalog.renew(lane, 'w1', list, 10_000);
    expect(Object.keys(await redis.hgetall(keys.catalogPacks(lane)))).toHaveLength(1);
    // A lease that lapsed while another worker took the name with another definition: the full announcement refuses.
    await redis.zadd(keys.catalogLeases(lane, 'renewed_tool'), Date.now() - 1, 'w1');
    await catalog.announce(lane, 'w2', [tool('two')], 10_000);
    await expect(catalog.renew(lane, 'w1', list, 10_000)).rejects.toMatchObject({ code: 'REGISTRY_ERROR' });
    expect(await stored()).toBe('two');
    await catalog.withdraw(lane, 'w1', list);
    await catalog.withdraw(lane, 'w2', [tool('two')]);
  });

  it('keeps each lane\'s tools apart, and sets aside a name announced in two lanes', async () => {
    const catalog = new Catalog(redis, keys);
    const hostDef = { ...def('x'), name: 'lane_tool', tier: 'host' as const };
    const squatter = { ...def('x'), name: 'lane_tool' };
    await catalog.announce('host', 'wh', [hostDef], 10_000);
    let snapshot = await catalog.snapshot();
    expect(snapshot.entries.get('lane_tool')).toMatchObject({ lane: 'host', liveWorkers: 1 });
    expect(snapshot.lanes).toContain('host');
    // A platform worker announcing the same name writes only its own lane; the name is then served by neither.
    await catalog.announce(L, 'wp', [squatter], 10_000);
    snapshot = await catalog.snapshot();
    expect(snapshot.entries.has('lane_tool')).toBe(false);
    expect(snapshot.ambiguous.get('lane_tool')).toEqual(['host', L]);
    expect(JSON.parse((await redis.hget(keys.catalogDefinitions('host'), 'lane_tool'))!)).toMatchObject({ tier: 'host' });
  });
});
