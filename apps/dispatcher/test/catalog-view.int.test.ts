import { randomUUID } from 'node:crypto';
import { isFleetError } from '@forge-fleet/shared';
import { Catalog, fleetKeys } from '@forge-fleet/store';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { redisUrl, testPrefix } from '../../../test/fixtures/redis.js';
import { CatalogView } from '../src/catalog/catalog-view.js';

const def = (name: string) => ({ name, description: name, parameters: { type: 'object', properties: {} }, tier: 'platform' as const, retryable: false, speculatable: false, requiresConfirmation: false });

/**
 * The dispatcher's catalog copy against a real Redis: a worker that has
 * announced its tools (and so said it is ready) must be found by the next
 * call, however recently the copy was read; names no worker announced must
 * not make it read Redis for every call.
 */
describe('the catalog view', () => {
  const opened: Redis[] = [];
  const views: CatalogView[] = [];
  afterEach(() => {
    for (const v of views.splice(0)) v.stop();
    for (const r of opened.splice(0)) r.disconnect();
  });

  async function setUp() {
    const prefix = testPrefix('catalog-view');
    const redis = new Redis(redisUrl());
    opened.push(redis);
    const catalog = new Catalog(redis, fleetKeys(prefix));
    // The periodic read is an hour away: only what a call does can refresh the view.
    const view = new CatalogView(catalog, prefix, 3_600_000, pino({ level: 'silent' }));
    views.push(view);
    await view.start();
    return { catalog, view };
  }

  it('finds a tool announced just after its last read, on the first call', async () => {
    const { catalog, view } = await setUp();
    const misses: string[] = [];
    for (let i = 0; i < 20; i++) {
      const name = `tool_${i}`;
      // A read just now (the periodic one, or one a worker's notification caused), then the announcement.
      await view.refresh();
      await catalog.announce('platform', `w-${randomUUID()}`, [def(name)], 60_000);
      await view.ensure(name);
      try {
        expect(view.lookup(name).name).toBe(name);
      } catch (error) {
        misses.push(`${name}: ${isFleetError(error) ? error.code : String(error)}`);
      }
    }
    expect(misses).toEqual([]);
  });

  it('reads Redis a few times a second at most, however many calls name tools nobody announced', async () => {
    const { catalog, view } = await setUp();
    const reads = vi.spyOn(catalog, 'snapshot');
    const started = performance.now();
    await Promise.all(Array.from({ length: 500 }, (_, i) => view.ensure(`nobody_${i % 7}`)));
    for (let round = 0; round < 5; round++) await Promise.all(Array.from({ length: 100 }, () => view.ensure('nobody')));
    const seconds = (performance.now() - started) / 1000;
    expect(() => view.lookup('nobody')).toThrow(/not found/);
    // One read per MISS_REFRESH_MS (100 ms) of the run, and one for the first burst.
    expect(reads.mock.calls.length).toBeLessThanOrEqual(Math.ceil(seconds * 10) + 2);
  });
});
