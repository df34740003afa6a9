import { describe, expect, it } from 'vitest';
import { FleetEnv } from './parse.js';
import { RedisUrl } from './redis-target.js';

describe('REDIS_URL', () => {
  it('passes a single server URL to ioredis untouched', () => {
    for (const url of ['redis://127.0.0.1:6379', 'rediss://user:p%40ss@redis.internal:6380/2', 'redis://x', '/run/redis.sock']) {
      expect(RedisUrl.parse(url)).toEqual({ kind: 'server', url });
    }
  });

  it('reads a cluster URL into its seed nodes, credentials and TLS', () => {
    expect(RedisUrl.parse('redis+cluster://10.0.0.1:7000,10.0.0.2:7001,[::1]:7002')).toEqual({
      kind: 'cluster',
      url: 'redis+cluster://10.0.0.1:7000,10.0.0.2:7001,[::1]:7002',
      nodes: [
        { host: '10.0.0.1', port: 7000 },
        { host: '10.0.0.2', port: 7001 },
        { host: '::1', port: 7002 },
      ],
      tls: false,
    });
    expect(RedisUrl.parse('rediss+cluster://fleet:p%40ss@cache.example:6379/')).toMatchObject({
      kind: 'cluster',
      nodes: [{ host: 'cache.example', port: 6379 }],
      username: 'fleet',
      password: 'p@ss',
      tls: true,
    });
    expect(RedisUrl.parse('redis+cluster://:secret@a:1')).toMatchObject({ password: 'secret' });
    expect(RedisUrl.parse('redis+cluster://:secret@a:1')).not.toHaveProperty('username');
  });

  it('refuses a malformed cluster URL, saying what a good one looks like', () => {
    for (const url of ['redis+cluster://', 'redis+cluster://a', 'redis+cluster://a:1,,b:2', 'redis+cluster://a:99999', 'redis+cluster://a:1/3', 'redis+cluster://a:1?tls=1']) {
      const parsed = RedisUrl.safeParse(url);
      expect(parsed.success, url).toBe(false);
      expect(parsed.error?.issues[0]?.message).toContain('redis+cluster://10.0.0.1:7000,');
    }
  });

  it('is required, with a message that says what to set', () => {
    expect(FleetEnv.safeParse({}).error?.issues[0]).toMatchObject({ path: ['REDIS_URL'], message: expect.stringContaining('set REDIS_URL') as string });
    expect(FleetEnv.parse({ REDIS_URL: 'redis+cluster://h:7000' }).REDIS_URL).toMatchObject({ kind: 'cluster' });
  });
});
