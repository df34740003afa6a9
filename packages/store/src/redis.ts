import type { RedisTarget } from '@forge-fleet/shared';
import { Cluster, Redis, type RedisOptions } from 'ioredis';

/**
 * A connection to the fleet's Redis: one server, or a Redis Cluster. Both
 * speak the same commands; what differs is that on a cluster one command,
 * script or pipeline may only touch keys of one slot (see docs/cluster.md).
 */
export type RedisConnection = Redis | Cluster;

/** Where a connection reports its errors (a pino logger fits). */
export interface ConnectionLog {
  warn(fields: object, message: string): void;
}

/** One line per connection per this many ms while Redis stays away: reconnection attempts fail several times a second. */
const ERROR_LOG_INTERVAL_MS = 10_000;

/**
 * Opens a connection for one role. BullMQ workers and blocking readers need
 * `maxRetriesPerRequest: null` (a blocking command must not be cut short by
 * the retry limit); request-path and queue connections keep a limit so a
 * Redis outage surfaces as an error instead of a hang.
 *
 * A cluster target opens an ioredis `Cluster`: it reads the slot map from the
 * seed nodes and sends each command to the shard that owns its keys; the
 * per-node options (credentials, TLS, retries, connection name) go to every
 * node it connects to.
 *
 * With `log`, connection errors (refused, reset: Redis restarting or cut off)
 * go there as warnings, at most one per {@link ERROR_LOG_INTERVAL_MS}; without
 * one, ioredis prints each as an "Unhandled error event" stack trace on
 * stderr, outside the JSON log. ioredis reconnects by itself either way.
 */
export function connectRedis(target: RedisTarget, role: 'command' | 'blocking' | 'queue', log?: ConnectionLog): RedisConnection {
  const connection = open(target, role);
  if (log !== undefined) {
    let lastLogged = 0;
    let missed = 0;
    connection.on('error', (err: unknown) => {
      const now = Date.now();
      if (now - lastLogged < ERROR_LOG_INTERVAL_MS) {
        missed++;
        return;
      }
      log.warn({ err, role, ...(missed > 0 ? { since: missed } : {}) }, 'Redis connection error; reconnecting');
      lastLogged = now;
      missed = 0;
    });
  }
  return connection;
}

function open(target: RedisTarget, role: 'command' | 'blocking' | 'queue'): RedisConnection {
  // Auto-pipelining batches the many small commands of the request path into one write per turn (on a cluster,
  // one per shard). A BullMQ queue's connection gets none: BullMQ defines dozens of scripts on it, and ioredis
  // copies all of them onto every pipeline it makes.
  const enableAutoPipelining = role === 'command';
  const nodeOptions: RedisOptions = {
    maxRetriesPerRequest: role === 'blocking' ? null : 3,
    connectionName: `forge-${role}`,
  };
  if (target.kind === 'server') return new Redis(target.url, { ...nodeOptions, enableAutoPipelining });
  return new Cluster(
    target.nodes.map((n) => ({ host: n.host, port: n.port })),
    {
      enableAutoPipelining,
      redisOptions: {
        ...(target.username === undefined ? {} : { username: target.username }),
        ...(target.password === undefined ? {} : { password: target.password }),
        ...(target.tls ? { tls: {} } : {}),
        ...nodeOptions,
      },
    },
  );
}

/** How long a close waits for Redis to answer its QUIT before it drops the connection. */
const QUIT_WAIT_MS = 1000;

/**
 * Closes a connection without throwing when it is already closed. A connection that is not up (Redis away, still
 * reconnecting) is dropped at once: its QUIT would wait in the offline queue for a Redis that may never come back,
 * holding a stopping process. One that is up gets QUIT (what it sent before is answered first), for a bounded time.
 */
export async function closeRedis(redis: RedisConnection): Promise<void> {
  if (redis.status !== 'ready') {
    redis.disconnect();
    return;
  }
  let timer: NodeJS.Timeout | undefined;
  const gaveUp = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), QUIT_WAIT_MS)));
  try {
    if ((await Promise.race([redis.quit(), gaveUp])) === 'late') redis.disconnect();
  } catch {
    redis.disconnect();
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Whether an error is ioredis' way of saying Redis is away for now — the retry
 * limit of a command reached while reconnecting, a closed connection, a refused
 * or reset socket, a restarted server still loading its data, a cluster
 * failing over — rather than Redis refusing the command itself. A step that
 * failed so may be tried again; one Redis refused may not.
 */
export function isRedisAway(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const code = (error as { code?: unknown }).code;
  return (
    error.name === 'MaxRetriesPerRequestError' ||
    error.message === 'Connection is closed.' ||
    error.message.startsWith("Stream isn't writeable") ||
    code === 'ECONNREFUSED' ||
    code === 'ECONNRESET' ||
    code === 'EPIPE' ||
    code === 'ETIMEDOUT' ||
    /^(LOADING|TRYAGAIN|CLUSTERDOWN|MASTERDOWN|READONLY)\b/.test(error.message)
  );
}
