import type { QueueStats, QueueStatsList } from '@forge-fleet/shared';
import { type FleetKeys } from './keys.js';
import type { Queue } from 'bullmq';
import type { RedisConnection } from './redis.js';
import { Catalog, type PackEntry } from './catalog.js';
import { parseLane } from './lanes.js';
import { COUNT_CALLS, luaScript } from './scripts.js';
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
 * Reads, per queue the live catalog knows of, BullMQ's job counts and the
 * number of live workers: what an operator (`forge queues`, `GET /v1/queues`)
 * or a metrics exporter wants to see. Reads only; each call reads afresh.
 */
export class QueueStatsReader {
  readonly #queueConnection: RedisConnection;
  readonly #keys: FleetKeys;
  readonly #catalog: Catalog;
  readonly #countCalls: (keys: readonly string[], args: readonly (string | number)[]) => Promise<number[]>;
  readonly #queues = new Map<string, Queue>();

  constructor(options: QueueStatsReaderOptions) {
    this.#queueConnection = options.queueConnection ?? options.redis;
    this.#keys = options.keys;
    this.#catalog = new Catalog(options.redis, options.keys);
    this.#countCalls = luaScript<number[]>(options.redis, 'forgeCountCalls', 'variable', COUNT_CALLS);
  }

  /**
   * Every tool pack's queue that has a live worker or holds jobs, sorted by
   * lane and queue, with its job counts, live workers and tools as of `now`.
   * @throws the Redis error when a read is refused (e.g. `NOPERM` under an ACL that does not allow it).
   */
  async read(now = Date.now()): Promise<QueueStatsList> {
    const snapshot = await this.#catalog.snapshot(now);
    const shown = snapshot.packs
      .filter((p) => p.liveWorkers > 0 || p.waiting + p.delayed + p.active > 0)
      .sort((x, y) => (x.lane === y.lane ? (x.queue < y.queue ? -1 : 1) : x.lane < y.lane ? -1 : 1));
    const queues = await Promise.all(shown.map((p) => this.#readPack(p)));
    return { queues: queues.filter((q) => q !== undefined), at: now };
  }

  /** Closes the queues it opened (not the connections it was given). */
  async close(): Promise<void> {
    const queues = [...this.#queues.values()];
    this.#queues.clear();
    await Promise.all(queues.map((q) => q.close()));
  }

  async #readPack(pack: PackEntry): Promise<QueueStats | undefined> {
    const lane = parseLane(pack.lane);
    if (lane === undefined) return undefined;
    const q = `${this.#keys.prefix}:${pack.queue}:`;
    const [counts, [waitingCalls, activeCalls]] = await Promise.all([this.#queue(pack.queue).getJobCounts('waiting', 'active', 'delayed', 'failed', 'prioritized'), this.#countCalls([`${q}wait`, `${q}active`], [q])]);
    const of = (type: string): number => counts[type] ?? 0;
    return {
      lane: pack.lane,
      tier: lane.tier,
      ...(lane.pool === undefined ? {} : { pool: lane.pool }),
      queue: pack.queue,
      pack: pack.id,
      tools: [...pack.tools.keys()].sort(),
      // BullMQ keeps jobs added with a priority in a set of their own; to an operator both are waiting for a worker.
      waiting: of('waiting') + of('prioritized'),
      active: of('active'),
      delayed: of('delayed'),
      failed: of('failed'),
      workers: pack.liveWorkers,
      // A job may carry a batch of calls admitted together: what waits and runs, counted in calls.
      calls: { waiting: Number(waitingCalls ?? 0), active: Number(activeCalls ?? 0) },
      ...(pack.direct ? { direct: true as const } : {}),
    };
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
