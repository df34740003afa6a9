import { type FleetKeys, laneOf, PoolName, type QueueStats, type QueueStatsList, queueName, type Tier, TIERS } from '@forge-fleet/shared';
import type { Queue } from 'bullmq';
import type { RedisConnection } from './redis.js';
import { Catalog } from './catalog.js';
import { openQueue } from './queues.js';

/** Where {@link QueueStatsReader} reads. */
export interface QueueStatsReaderOptions {
  /** Reads the catalog (lanes, tools, leases). */
  readonly redis: RedisConnection;
  /**
   * Opens the BullMQ queues that are counted. A dispatcher passes its queue
   * connection, so BullMQ's scripts stay off the request path's connection.
   * @defaultValue `redis`
   */
  readonly queueConnection?: RedisConnection | undefined;
  readonly keys: FleetKeys;
}

/**
 * The tier and pool of a lane, or `undefined` for a name no queue has: workers
 * register their lanes themselves, so the set is not to be believed blindly.
 */
function laneQueue(lane: string): { tier: Tier; pool?: string } | undefined {
  if ((TIERS as readonly string[]).includes(lane)) return { tier: lane as Tier };
  const pool = lane.startsWith('host.') ? lane.slice('host.'.length) : undefined;
  if (pool === undefined || !PoolName.safeParse(pool).success || laneOf('host', pool) !== lane) return undefined;
  return { tier: 'host', pool };
}

/**
 * Reads, per queue the live catalog knows of, BullMQ's job counts and the
 * number of live workers: what an operator (`forge queues`, `GET /v1/queues`)
 * or a metrics exporter wants to see. Reads only; each call reads afresh.
 */
export class QueueStatsReader {
  readonly #redis: RedisConnection;
  readonly #queueConnection: RedisConnection;
  readonly #keys: FleetKeys;
  readonly #catalog: Catalog;
  readonly #queues = new Map<string, Queue>();

  constructor(options: QueueStatsReaderOptions) {
    this.#redis = options.redis;
    this.#queueConnection = options.queueConnection ?? options.redis;
    this.#keys = options.keys;
    this.#catalog = new Catalog(options.redis, options.keys);
  }

  /**
   * Every lane some worker has announced tools in, sorted by lane, with its
   * queue's job counts and live workers as of `now`.
   * @throws the Redis error when a read is refused (e.g. `NOPERM` under an ACL that does not allow it).
   */
  async read(now = Date.now()): Promise<QueueStatsList> {
    const snapshot = await this.#catalog.snapshot(now);
    const toolsByLane = new Map<string, string[]>();
    const add = (lane: string, tool: string): void => void toolsByLane.set(lane, [...(toolsByLane.get(lane) ?? []), tool]);
    for (const [tool, entry] of snapshot.entries) add(entry.lane, tool);
    // A name announced in two lanes is served by neither, but its workers are alive all the same.
    for (const [tool, lanes] of snapshot.ambiguous) for (const lane of lanes) add(lane, tool);
    const queues = await Promise.all(
      snapshot.lanes.flatMap((lane) => {
        const found = laneQueue(lane);
        return found === undefined ? [] : [this.#readLane(lane, found.tier, found.pool, toolsByLane.get(lane) ?? [], now)];
      }),
    );
    return { queues, at: now };
  }

  /** Closes the queues it opened (not the connections it was given). */
  async close(): Promise<void> {
    const queues = [...this.#queues.values()];
    this.#queues.clear();
    await Promise.all(queues.map((q) => q.close()));
  }

  async #readLane(lane: string, tier: Tier, pool: string | undefined, tools: readonly string[], now: number): Promise<QueueStats> {
    const name = queueName(this.#keys.prefix, tier, pool);
    const [counts, workers] = await Promise.all([this.#queue(name).getJobCounts('waiting', 'active', 'delayed', 'failed', 'prioritized'), this.#liveWorkers(lane, tools, now)]);
    const of = (type: string): number => counts[type] ?? 0;
    return {
      lane,
      tier,
      ...(pool === undefined ? {} : { pool }),
      queue: name,
      // BullMQ keeps jobs added with a priority in a set of their own; to an operator both are waiting for a worker.
      waiting: of('waiting') + of('prioritized'),
      active: of('active'),
      delayed: of('delayed'),
      failed: of('failed'),
      workers,
    };
  }

  /** Distinct workers with an unexpired lease on any of the lane's tools (one worker leases every tool it serves). */
  async #liveWorkers(lane: string, tools: readonly string[], now: number): Promise<number> {
    if (tools.length === 0) return 0;
    const reads = this.#redis.pipeline();
    for (const tool of tools) reads.zrange(this.#keys.catalogLeases(lane, tool), now, '+inf', 'BYSCORE');
    const workers = new Set<string>();
    for (const [error, members] of (await reads.exec()) ?? []) {
      if (error !== null) throw error;
      for (const id of members as string[]) workers.add(id);
    }
    return workers.size;
  }

  #queue(name: string): Queue {
    let queue = this.#queues.get(name);
    if (queue === undefined) {
      queue = openQueue(this.#queueConnection, this.#keys.prefix, name);
      this.#queues.set(name, queue);
    }
    return queue;
  }
}
