import { randomBytes, randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { FleetClient } from '@forge-fleet/client';
import { deriveQueueKey, queueName } from '@forge-fleet/shared';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../fixtures/fleet.js';
import { fleetPerTest } from '../fixtures/fleet-per-test.js';

const PACK_TOOLS = join(ROOT, 'test', 'fixtures', 'pack-tools.ts');

/**
 * A worker whose FORGE_CALL_KEY cannot verify its lane's calls (another
 * fleet's secret, another tier's or pool's key) must refuse to start, saying
 * which variable is wrong and how to make the right one, and never take a
 * call: not fail every call it takes as FORGED_CALL.
 */
describe('a worker with the wrong call key', () => {
  const t = fleetPerTest();
  const start = (tier: string, key: Buffer, extra: { pool?: string; env?: Record<string, string> } = {}) =>
    t.fleet.worker({
      tier,
      tools: PACK_TOOLS,
      ...(extra.pool === undefined ? {} : { pool: extra.pool }),
      env: { FORGE_TEST_PACK: 'mix_a', FORGE_CALL_KEY: key.toString('base64url'), ...(extra.pool === undefined ? {} : { FORGE_TEST_POOL: extra.pool }), ...extra.env },
    });

  it.each([
    ['a key from another signing secret', () => deriveQueueKey(randomBytes(32), queueName(t.fleet.prefix, 'host')), undefined],
    ["another tier's key", () => t.fleet.callKey('platform'), undefined],
    ["the pool-less host key on a pool worker", () => t.fleet.callKey('host'), 'payments'],
  ])('exits at start with CONFIG_INVALID naming FORGE_CALL_KEY and the command that makes the right key: %s', async (_what, key, pool) => {
    await t.fleet.dispatcher({ FORGE_APPROVAL: 'auto' });
    const failed = await start('host', key(), pool === undefined ? {} : { pool }).then(
      () => 'started',
      (error: Error) => error.message,
    );
    expect(failed).toMatch(/exited \(1\) before it was ready/);
    expect(failed).toMatch(/CONFIG_INVALID: invalid FORGE_CALL_KEY/);
    expect(failed).toContain(`forge keys worker-key --secret <the dispatchers' signing.secret> --tier host${pool === undefined ? '' : ` --pool ${pool}`}`);
    // It announced nothing: no tool of it is in the catalog.
    expect(await t.redis.hkeys(`${t.fleet.prefix}:{${t.fleet.prefix}.catalog}:${pool === undefined ? 'host' : `host.${pool}`}:definitions`)).toEqual([]);
  });

  it('started before any dispatcher, it stops once one publishes its lane\'s key check, having run no call', async () => {
    const wrong = await start('host', deriveQueueKey(randomBytes(32), queueName(t.fleet.prefix, 'host')));
    t.client = new FleetClient({ url: (await t.fleet.dispatcher({ FORGE_APPROVAL: 'auto' })).url, retryWindowMs: 0 });
    const id = `wrong-key-${randomUUID()}`;
    const submitted = t.client.call('mix_a', {}, { id, timeoutMs: 15_000 }).then(
      (r) => r.error?.code ?? 'completed',
      (e: { code?: string }) => `refused ${e.code}`,
    );
    expect(await wrong.exited).toBe(1);
    expect(wrong.output()).toMatch(/CONFIG_INVALID: invalid FORGE_CALL_KEY/);
    // Its call never ran: it was refused, or handed back and ended when the worker left (never FORGED_CALL).
    expect(await submitted).toMatch(/^(refused NO_WORKER|NO_WORKER)$/);
    expect(await t.runs(id)).toBe(0);
  });

  it('a worker with the right key starts and serves', async () => {
    t.client = new FleetClient({ url: (await t.fleet.dispatcher({ FORGE_APPROVAL: 'auto' })).url });
    await start('host', t.fleet.callKey('host'));
    expect(await t.client.call('mix_a', {})).toMatchObject({ isError: false, structuredContent: { runs: 1 } });
  });
});
