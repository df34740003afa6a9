import { randomBytes, randomUUID } from 'node:crypto';
import { type CallEnvelope, deriveQueueKey, isFinalStatus, queueName, signEnvelope } from '@forge-fleet/shared';
import { AuditArchivist, CallStore, Catalog, fleetKeys } from '@forge-fleet/store';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestFleet } from '../fixtures/fleet.js';
import { redisUrl } from '../fixtures/redis.js';
import { until } from '../fixtures/wait.js';

/**
 * Someone who can write to Redis but holds no dispatcher key puts jobs
 * straight onto the host queue with raw BullMQ. None of them may run; each
 * ends as FORGED_CALL with an audit entry and a risk signal. A correctly
 * signed job injected the same way does run, so the test can tell.
 */
describe('a host worker refuses calls no dispatcher signed for its queue', () => {
  const fleet = new TestFleet();
  let redis: Redis;
  let queue: Queue;
  let store: CallStore;
  const keys = () => fleetKeys(fleet.prefix);
  const hour = 3_600_000;

  const envelopeFor = (id: string, extra: Partial<CallEnvelope> = {}): CallEnvelope => ({
    v: 1,
    call: { id, name: 'host_count', arguments: {} },
    tier: 'host',
    replyTo: 'd-test',
    enqueuedAt: Date.now(),
    caller: 'intruder',
    ...extra,
  });

  /** Records the call as a dispatcher would, then enqueues the job by hand. */
  async function inject(envelope: CallEnvelope): Promise<void> {
    await store.create({ id: envelope.call.id, lane: 'host', name: envelope.call.name, status: 'queued', replyTo: envelope.replyTo, envelope });
    await queue.add(envelope.call.name, envelope, { removeOnComplete: true });
  }

  const finalRecord = (id: string) => until(`call ${id} to end`, async () => {
    const record = await store.get(id);
    return record !== undefined && isFinalStatus(record.status) ? record : undefined;
  });

  beforeAll(async () => {
    redis = new Redis(redisUrl());
    store = new CallStore(redis, keys(), hour);
    await fleet.worker({ tier: 'host' });
    // The queue the host worker reads: its tool pack's, found in the catalog as anyone with Redis access can.
    const pack = (await new Catalog(redis, keys()).snapshot()).packs.find((p) => p.lane === 'host' && p.liveWorkers > 0)!;
    queue = new Queue(pack.queue, { connection: new Redis(redisUrl(), { maxRetriesPerRequest: null }), prefix: fleet.prefix });
  });

  afterAll(async () => {
    await queue.close();
    redis.disconnect();
    await fleet.stopAll();
  });

  it('runs none of the forged jobs, ends each as FORGED_CALL and audits it; a signed one runs', async () => {
    const hostKey = fleet.callKey('host');
    const platformKey = fleet.callKey('platform');
    const id = (what: string) => `${what}-${randomUUID()}`;
    const forged: Record<string, CallEnvelope> = {
      unsigned: envelopeFor(id('unsigned')),
      'another queue': signEnvelope(envelopeFor(id('moved'), { tier: 'platform' }), platformKey, Date.now() + hour),
      'another queue, relabelled': { ...signEnvelope(envelopeFor(id('relabelled'), { tier: 'platform' }), platformKey, Date.now() + hour), tier: 'host' },
      'altered arguments': (() => {
        const signed = signEnvelope(envelopeFor(id('altered')), hostKey, Date.now() + hour);
        return { ...signed, call: { ...signed.call, arguments: { amount: 1_000_000 } } };
      })(),
      'replayed after expiry': signEnvelope(envelopeFor(id('replayed')), hostKey, Date.now() - 1),
      'unknown key': signEnvelope(envelopeFor(id('unknown-key')), deriveQueueKey(randomBytes(32), queueName(fleet.prefix, 'host')), Date.now() + hour),
    };
    const genuine = signEnvelope(envelopeFor(id('genuine')), hostKey, Date.now() + hour);

    for (const envelope of Object.values(forged)) await inject(envelope);
    await inject(genuine);

    const ok = await finalRecord(genuine.call.id);
    expect(ok).toMatchObject({ status: 'completed', result: { structuredContent: { runs: 1 } } });

    for (const [what, envelope] of Object.entries(forged)) {
      const record = await finalRecord(envelope.call.id);
      expect({ what, status: record.status, code: record.result?.error?.code }).toEqual({ what, status: 'failed', code: 'FORGED_CALL' });
      expect(await redis.get(`${fleet.prefix}:test:runs:{${envelope.call.id}}`)).toBeNull();
    }

    // No dispatcher runs here: file the worker's audit inbox as a dispatcher's audit keeper would.
    await new AuditArchivist({ redis, keys: keys(), lanes: () => ['host'], log: { error: () => {} } }).drain();
    const stream = await redis.xrange(keys().audit, '-', '+');
    const field = (fields: string[], name: string): string | undefined => fields[fields.indexOf(name) + 1];
    const entries = stream.map(([, fields]) => ({ kind: field(fields, 'kind'), writer: field(fields, 'writer'), entry: JSON.parse(field(fields, 'entry') ?? '{}') as { callId: string; errorCategory?: string; kind?: string; reason?: string } }));
    expect(new Set(entries.map((e) => e.writer))).toEqual(new Set(['host']));
    for (const envelope of Object.values(forged)) {
      const about = entries.filter((e) => e.entry.callId === envelope.call.id);
      expect(about.some((e) => e.kind === 'audit' && e.entry.errorCategory === 'forged_call' && typeof e.entry.reason === 'string')).toBe(true);
      expect(about.some((e) => e.kind === 'risk' && e.entry.kind === 'forged_call')).toBe(true);
    }
    expect(entries.some((e) => e.entry.callId === genuine.call.id && (e.kind === 'risk' || e.entry.errorCategory === 'forged_call'))).toBe(false);
  });

  it('ends NO_WORKER, not run, a signed call of a tool the worker does not serve that reaches its queue', async () => {
    // Through the fleet, only a call sent on to a worker whose MCP server has dropped the tool since gets here.
    const id = `unserved-${randomUUID()}`;
    await inject(signEnvelope(envelopeFor(id, { call: { id, name: 'host_not_served_here', arguments: {} } }), fleet.callKey('host'), Date.now() + hour));
    const record = await finalRecord(id);
    expect(record).toMatchObject({ status: 'failed', result: { error: { code: 'NO_WORKER' } } });
    expect(String(record.result?.error?.details?.reason)).toMatch(/does not serve it/);
    expect(record.result?.error?.message).not.toMatch(/register it/);
  });
});
