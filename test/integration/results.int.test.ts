import { randomUUID } from 'node:crypto';
import { FleetClient } from '@forge-fleet/client';
import { fleetKeys } from '@forge-fleet/store';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FleetProcess, TestFleet } from '../fixtures/fleet.js';
import { redisUrl } from '../fixtures/redis.js';
import { until } from '../fixtures/wait.js';

/** How a worker ends calls: results over the size limit become a typed error, and every outcome is audited. */
describe('call outcomes at the worker', () => {
  const fleet = new TestFleet();
  let client: FleetClient;
  let redis: Redis;
  let worker: FleetProcess;

  beforeAll(async () => {
    redis = new Redis(redisUrl());
    worker = await fleet.worker({ tier: 'platform', env: { FORGE_MAX_RESULT_BYTES: '4096' } });
    client = new FleetClient({ url: (await fleet.dispatcher()).url });
  });

  afterAll(async () => {
    await client?.close();
    redis?.disconnect();
    await fleet.stopAll();
  });

  it('ends a call whose result is over FORGE_MAX_RESULT_BYTES with RESOURCE_LIMIT, and keeps serving', async () => {
    const big = await client.call('echo', { text: 'x'.repeat(10_000) });
    expect(big).toMatchObject({ isError: true, error: { code: 'RESOURCE_LIMIT', details: { limit: 'output' } } });
    expect(big.content).toContain('FORGE_MAX_RESULT_BYTES');
    expect(await client.call('echo', { text: 'small' })).toMatchObject({ isError: false, structuredContent: { echo: { text: 'small' } } });
  });

  it("logs the outcome a call ended with, a result's RESOURCE_LIMIT included, not the one its tool gave", async () => {
    const id = `big-${randomUUID()}`;
    await client.call('echo', { text: 'z'.repeat(10_000) }, { id });
    const line = await until("the worker's log line of the call's end", () => worker.output().split('\n').find((l) => l.includes(id) && l.includes('call finished')));
    expect(JSON.parse(line)).toMatchObject({ status: 'failed', code: 'RESOURCE_LIMIT' });
  });

  it('audits each outcome: completed, or failed with its code', async () => {
    const [ok, bad] = [`ok-${randomUUID()}`, `bad-${randomUUID()}`];
    await client.call('echo', { n: 1 }, { id: ok });
    await client.call('echo', { text: 'y'.repeat(10_000) }, { id: bad });
    // The worker audits after it has answered (the audit write is not on the caller's path): wait for both entries.
    type Entry = { callId?: string; decision?: string; code?: string; tier?: string };
    const read = async (): Promise<Entry[]> => (await redis.xrange(fleetKeys(fleet.prefix).audit, '-', '+')).map(([, fields]) => JSON.parse(fields[3] ?? '{}') as Entry);
    const entries = await until('the audit entries of both calls', async () => {
      const found = await read();
      return found.some((e) => e.callId === ok && e.decision === 'completed') && found.some((e) => e.callId === bad && e.decision === 'failed') && found;
    });
    expect(entries).toEqual(expect.arrayContaining([expect.objectContaining({ callId: ok, decision: 'completed', tier: 'platform' })]));
    expect(entries).toEqual(expect.arrayContaining([expect.objectContaining({ callId: bad, decision: 'failed', code: 'RESOURCE_LIMIT' })]));
  });
});
