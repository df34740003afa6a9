/**
 * @module @forge-fleet/local-redis
 *
 * A throw-away `redis-server` on a free loopback port: what the test suite,
 * `npm start` and the benchmark use when `REDIS_URL` is not set.
 */
export { startLocalRedis, hasRedisServer, freePort, LocalRedisUnavailableError, type LocalRedis, type LocalRedisOptions } from './local-redis.js';
