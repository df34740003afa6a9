import { randomUUID } from 'node:crypto';
import { type CallEnvelope, fleetKeys, type ToolResult } from '@forge-fleet/shared';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CallStore, Catalog, publishReply, ReplyInbox } from '@forge-fleet/store';
import { redisUrl } from '../fixtures/redis.js';

const prefix = `st${randomUUID().slice(0, 8)}`;
const keys = fleetKeys(prefix);
let redis: Redis;
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
const create = (id: string, extra: Partial<CallEnvelope> = {}) => store.create({ id, name: 'echo', status: 'queued', replyTo: 'd1', envelope: envelope(id, extra) });

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
    expect(await redis.pttl(keys.call(id))).toBeGreaterThan(0);
  });

  it('starts a queued call, and reports a second start as a redelivery', async () => {
    const id = randomUUID();
    await create(id);
    expect(await store.start(id, 'w1')).toEqual({ outcome: 'started', starts: 1 });
    expect(await store.start(id, 'w2')).toEqual({ outcome: 'redelivered', starts: 2 });
    expect((await store.get(id))?.status).toBe('running');
  });

  it('finishes exactly once, naming the submitter then the watchers', async () => {
    const id = randomUUID();
    await create(id);
    await store.start(id, 'w1');
    await store.watch(id, 'd2');
    await store.watch(id, 'd1'); // the submitter is not added as a watcher
    expect(await store.finish(id, 'completed', result(id))).toEqual(['d1', 'd2']);
    expect(await store.finish(id, 'failed', result(id, 'second'))).toBeUndefined();
    const record = await store.get(id);
    expect(record).toMatchObject({ status: 'completed', result: { content: 'ok' } });
    expect(await redis.exists(keys.watchers(id))).toBe(0);
  });

  it('refuses to start what is final, cancelled, expired or missing', async () => {
    const done = randomUUID();
    await create(done);
    await store.finish(done, 'completed', result(done));
    expect((await store.start(done, 'w')).outcome).toBe('final');
    expect((await store.start(randomUUID(), 'w')).outcome).toBe('missing');
    const expired = randomUUID();
    await create(expired, { deadline: Date.now() - 1 });
    expect((await store.start(expired, 'w')).outcome).toBe('expired');
  });

  it('cancels a queued call at once and flags a running one', async () => {
    const queued = randomUUID();
    await create(queued);
    expect(await store.cancel(queued, result(queued, 'cancelled'))).toEqual({ state: 'cancelled', targets: ['d1'] });
    expect((await store.start(queued, 'w')).outcome).toBe('final');

    const running = randomUUID();
    await create(running);
    await store.start(running, 'w');
    expect(await store.cancel(running, result(running))).toEqual({ state: 'running' });
    expect(await store.cancel(randomUUID(), result('x'))).toEqual({ state: 'missing' });
  });

  it('puts a running call back to queued for a retry', async () => {
    const id = randomUUID();
    await create(id);
    await store.start(id, 'w');
    expect(await store.requeue(id)).toBe(true);
    expect(await store.start(id, 'w')).toEqual({ outcome: 'started', starts: 2 });
  });

  it('finishes only from the given status when asked to', async () => {
    const id = randomUUID();
    await create(id);
    await store.start(id, 'w');
    expect(await store.finish(id, 'failed', result(id), { onlyFrom: 'queued' })).toBeUndefined();
    expect((await store.get(id))?.status).toBe('running');
  });
});

describe('reply lists', () => {
  it('delivers a pushed result to the request waiting for it, and only to it', async () => {
    const blocking = new Redis(redisUrl(), { maxRetriesPerRequest: null });
    const inbox = new ReplyInbox(blocking, keys, 'd-inbox');
    inbox.start();
    try {
      const id = randomUUID();
      const waiting = inbox.wait(id, 5000);
      const other = inbox.wait(randomUUID(), 100);
      expect(inbox.waiting).toBe(2);
      await publishReply(redis, keys, ['d-inbox', 'd-inbox'], { v: 1, id, status: 'completed', result: result(id) });
      expect(await waiting).toMatchObject({ id, status: 'completed' });
      expect(await other).toBeUndefined();
      expect(inbox.waiting).toBe(0);
    } finally {
      await inbox.stop();
    }
  });
});

describe('the live catalog', () => {
  const def = (description: string) => ({ name: 'cat_tool', description, parameters: { type: 'object', properties: {} }, tier: 'platform' as const, retryable: false, speculatable: false, requiresConfirmation: false });

  it('counts live leases, refuses a conflicting definition while a lease lives, and forgets withdrawn workers', async () => {
    const catalog = new Catalog(redis, keys);
    await catalog.announce('w1', [def('one')], 10_000);
    await catalog.announce('w2', [def('one')], 10_000);
    expect((await catalog.snapshot()).get('cat_tool')?.liveWorkers).toBe(2);
    expect(await catalog.liveWorkers('cat_tool')).toBe(2);
    await expect(catalog.announce('w3', [def('two')], 10_000)).rejects.toMatchObject({ code: 'REGISTRY_ERROR' });
    await catalog.withdraw('w1', ['cat_tool']);
    await catalog.withdraw('w2', ['cat_tool']);
    expect((await catalog.snapshot()).get('cat_tool')?.liveWorkers).toBe(0);
    expect(await catalog.liveWorkers('cat_tool')).toBe(0);
    // With no live worker left, a new definition may replace the old one (a new deployment).
    await catalog.announce('w3', [def('two')], 10_000);
    expect(JSON.parse((await catalog.snapshot()).get('cat_tool')!.json)).toMatchObject({ description: 'two' });
  });
});
