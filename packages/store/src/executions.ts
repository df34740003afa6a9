import type { FleetKeys } from './keys.js';
import type { RedisConnection } from './redis.js';
import { luaScript } from './scripts.js';

/** KEYS[1] the envelope's executions; ARGV[1] this run's id, ARGV[2] when the record may go (epoch ms). */
const CLAIM_RUN = `redis.call('HSET', KEYS[1], ARGV[1], 1)
redis.call('PEXPIREAT', KEYS[1], ARGV[2])
return redis.call('HLEN', KEYS[1])`;

/**
 * Which signed envelopes a lane's workers have run, and how often: the replay
 * barrier. Call records and queues are written by dispatchers too, so a
 * dispatcher's Redis user could set a finished call back to `queued` and add
 * its captured job again; these keys are out of that user's reach (only the
 * lane's workers' user may touch them, see scripts/redis-acl.mjs). A run is
 * claimed under an id of its own, so a claim sent again after an outage
 * counts once.
 */
export class Executions {
  readonly #claim: (keys: readonly string[], args: readonly (string | number)[]) => Promise<number>;

  constructor(
    redis: RedisConnection,
    private readonly keys: FleetKeys,
  ) {
    this.#claim = luaScript<number>(redis, 'forgeClaimRun', 1, CLAIM_RUN);
  }

  /**
   * Records one run of the envelope whose MAC is `mac` and answers how many runs it has had, this one included.
   * `keepUntil`: epoch ms past the envelope's signature, after which no worker would take it anyway.
   */
  async claim(lane: string, mac: string, runId: string, keepUntil: number): Promise<number> {
    return Number(await this.#claim([this.keys.executions(lane, mac)], [runId, Math.ceil(keepUntil)]));
  }
}
