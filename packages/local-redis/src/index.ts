/**
 * @module @forge-fleet/local-redis
 *
 * A throw-away `redis-server` on a free loopback port: what the test suite,
 * `npm start` and the benchmark use when `REDIS_URL` is not set; and a
 * throw-away Redis Cluster of several such servers, for the cluster tests.
 */
export {
  startLocalRedis,
  startLocalRedisCluster,
  hasRedisServer,
  freePort,
  LocalRedisUnavailableError,
  type LocalRedis,
  type LocalRedisOptions,
  type LocalRedisCluster,
  type LocalRedisClusterOptions,
} from './local-redis.js';
