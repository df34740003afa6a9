import { Redis } from 'ioredis';
import { describe, expect, inject, it } from 'vitest';
import { redisUrl, testPrefix, withRedis } from '../fixtures/redis.js';

describe('the Redis test fixture', () => {
  it('provides a reachable, real Redis server', async () => {
    await withRedis(async (redis) => {
      expect(await redis.ping()).toBe('PONG');
      const info = await redis.info('server');
      expect(info).toMatch(/redis_version:\d+\.\d+/);
    });
    expect(['env', 'testcontainers', 'redis-server']).toContain(inject('redisSource'));
  });

  it('isolates tests by prefix and cleans up after them', async () => {
    let used = '';
    await withRedis(async (redis, prefix) => {
      used = prefix;
      await redis.set(`${prefix}:k`, 'v');
      expect(await redis.get(`${prefix}:k`)).toBe('v');
    });
    const check = new Redis(redisUrl());
    try {
      expect(await check.exists(`${used}:k`)).toBe(0);
    } finally {
      check.disconnect();
    }
    expect(testPrefix()).not.toBe(testPrefix());
    expect(testPrefix('x')).toMatch(/^\{x-[0-9a-f]{12}\}$/);
  });
});
