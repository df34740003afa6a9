import { randomUUID } from 'node:crypto';
import { FleetClient } from '@forge-fleet/client';
import type { CallProgress } from '@forge-fleet/shared';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestFleet } from '../fixtures/fleet.js';
import { redisUrl } from '../fixtures/redis.js';
import { progressed } from '../fixtures/wait.js';

/**
 * Progress reported by a tool (`ctx.progress`) travels worker → Redis →
 * dispatcher: it is kept on the call's record, where `GET /v1/calls/:id` shows
 * it, and pushed to the dispatchers waiting for the call (MCP forwards it:
 * see mcp.int.test.ts).
 */
describe('progress reported by tools', () => {
  const fleet = new TestFleet();
  let client: FleetClient;
  let redis: Redis;
  const release = (id: string) => redis.lpush(`${fleet.prefix}:test:release:{${id}}`, '1');

  beforeAll(async () => {
    redis = new Redis(redisUrl());
    await fleet.worker({ tier: 'platform', env: { FORGE_PROGRESS_INTERVAL_MS: '20' } });
    const { url } = await fleet.dispatcher();
    client = new FleetClient({ url });
  });

  afterAll(async () => {
    await client?.close();
    redis?.disconnect();
    await fleet.stopAll();
  });

  it('shows the latest report on the running call, step by step, and keeps the last one after the call ends', async () => {
    const id = `progress-${randomUUID()}`;
    expect((await client.submit('stepped', { steps: 3 }, { id })).status).not.toBe('failed');
    const seen: CallProgress[] = [];
    for (const step of [1, 2, 3]) {
      const view = await progressed(client, id, step);
      expect(view.status).toBe('running');
      expect(view.progress).toMatchObject({ progress: step, total: 3, message: `step ${step}` });
      seen.push(view.progress!);
      await release(id);
    }
    expect((await client.get(id, { waitMs: 10_000 })).status).toBe('completed');
    expect((await client.get(id)).progress).toMatchObject({ progress: 3, total: 3, message: 'step 3' });
    // Stamped by the worker, in order.
    expect(seen.map((p) => p.at)).toEqual([...seen.map((p) => p.at)].sort((a, b) => a - b));
  });
});
