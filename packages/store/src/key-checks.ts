import { type FleetKeys } from './keys.js';
import type { RedisConnection } from './redis.js';

/**
 * The key-check values of the lanes' call keys (see `keyCheck` in
 * packages/shared): written by dispatchers, which hold the signing secret,
 * read by each worker at start to prove its FORGE_CALL_KEY is its lane's.
 */
export class KeyChecks {
  readonly #redis: RedisConnection;
  readonly #keys: FleetKeys;

  constructor(redis: RedisConnection, keys: FleetKeys) {
    this.#redis = redis;
    this.#keys = keys;
  }

  /** Writes the check of each lane given (lane → check), in one command. */
  async publish(checks: ReadonlyMap<string, string>): Promise<void> {
    if (checks.size === 0) return;
    await this.#redis.hset(this.#keys.keyChecks, Object.fromEntries(checks));
  }

  /** The published check of one lane, if a dispatcher has written it. */
  async read(lane: string): Promise<string | undefined> {
    return (await this.#redis.hget(this.#keys.keyChecks, lane)) ?? undefined;
  }

  /** Asks the dispatchers to write their checks now (they re-read the catalog, lanes included, when told). */
  async request(lane: string, workerId: string): Promise<void> {
    await this.#redis.sadd(this.#keys.catalogLanes, lane);
    await this.#redis.publish(this.#keys.catalogChannel, workerId);
  }
}
