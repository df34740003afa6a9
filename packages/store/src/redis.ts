import { Redis, type RedisOptions } from 'ioredis';

/**
 * Opens a connection for one role. BullMQ workers and blocking readers need
 * `maxRetriesPerRequest: null` (a blocking command must not be cut short by
 * the retry limit); request-path and queue connections keep a limit so a
 * Redis outage surfaces as an error instead of a hang.
 */
export function connectRedis(url: string, role: 'command' | 'blocking' | 'queue', options: RedisOptions = {}): Redis {
  return new Redis(url, {
    maxRetriesPerRequest: role === 'blocking' ? null : 3,
    // Auto-pipelining batches the many small commands of the request path into one write per turn. A BullMQ
    // queue's connection gets none: BullMQ defines dozens of scripts on it, and ioredis copies all of them onto
    // every pipeline it makes.
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
