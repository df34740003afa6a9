import { Redis, type RedisOptions } from 'ioredis';

/**
 * Opens a connection for one role. BullMQ workers and blocking readers need
 * `maxRetriesPerRequest: null` (a blocking command must not be cut short by
 * the retry limit); request-path connections keep a limit so a Redis outage
 * surfaces as an error instead of a hang.
 */
export function connectRedis(url: string, role: 'command' | 'blocking', options: RedisOptions = {}): Redis {
  return new Redis(url, {
    maxRetriesPerRequest: role === 'blocking' ? null : 3,
    enableAutoPipelining: role === 'command',
    connectionName: `forge-${role}`,
    ...options,
  });
}

/** Closes a connection without throwing when it is already closed. */
export async function closeRedis(redis: Redis): Promise<void> {
  try {
    await redis.quit();
  } catch {
    redis.disconnect();
  }
}
