import { type FleetKeys, RegistryError, stableStringify, type ToolDefinition } from '@forge-fleet/shared';
import type { RedisConnection } from './redis.js';
import { ANNOUNCE_TOOLS, luaScript } from './scripts.js';

/** One tool as the live catalog holds it. */
export interface CatalogEntry {
  /** The lane (queue) whose workers announced it. */
  readonly lane: string;
  /** The definition as announced (stable JSON): compare it to skip re-parsing an unchanged tool. */
  readonly json: string;
  /** Workers holding an unexpired lease on the tool. */
  readonly liveWorkers: number;
}

/**
 * The live tool catalog in Redis: workers announce the definitions they serve
 * under a lease they keep renewing; dispatchers read definitions and liveness
 * from it. Definitions stay after their workers leave, so a dispatcher can
 * tell "no such tool" (TOOL_NOT_FOUND) from "nobody serves it now" (NO_WORKER).
 *
 * Each lane (queue) has its own definitions and leases, writable only by its
 * own workers' Redis users. A worker cannot see other lanes, so a name
 * announced in two lanes is caught by the dispatcher, which serves neither
 * (see {@link CatalogSnapshot.ambiguous}).
 */
export class Catalog {
  readonly #redis: RedisConnection;
  readonly #keys: FleetKeys;
  readonly #announce;

  constructor(redis: RedisConnection, keys: FleetKeys) {
    this.#redis = redis;
    this.#keys = keys;
    this.#announce = luaScript<(string | number)[]>(redis, 'forgeAnnounceTools', 'variable', ANNOUNCE_TOOLS);
  }

  /**
   * Announces or renews the worker's lease on each tool; with `notify`,
   * tells dispatchers to re-read the catalog now (a worker joining).
   * @throws RegistryError when a live worker serves one of the names with another definition.
   */
  async announce(lane: string, workerId: string, definitions: readonly ToolDefinition[], leaseMs: number, options: { notify?: boolean } = {}): Promise<void> {
    const now = Date.now();
    // Registering the lane needs no atomicity with the announcement: it only tells dispatchers where to look.
    void this.#redis.sadd(this.#keys.catalogLanes, lane).catch(() => undefined);
    const keys = [this.#keys.catalogDefinitions(lane), ...definitions.map((d) => this.#keys.catalogLeases(lane, d.name))];
    const args: (string | number)[] = [workerId, now, now + leaseMs];
    for (const d of definitions) args.push(d.name, stableStringify(d));
    const conflicts = await this.#announce(keys, args);
    if (conflicts.length > 0) {
      const described: string[] = [];
      for (let i = 0; i + 1 < conflicts.length; i += 2) described.push(`'${String(conflicts[i])}' (${String(conflicts[i + 1])} live worker(s))`);
      throw new RegistryError(
        `tool ${described.join(', ')} is already served with a different definition; deploy the same definition to every worker of a tool, or stop the workers serving the old one first`,
        { tools: described },
      );
    }
    if (options.notify === true) await this.#redis.publish(this.#keys.catalogChannel, workerId);
  }

  /** Gives up the worker's leases (on shutdown), so dispatchers stop routing to it at once. */
  async withdraw(lane: string, workerId: string, names: readonly string[]): Promise<void> {
    if (names.length === 0) return;
    const pipeline = this.#redis.pipeline();
    for (const name of names) pipeline.zrem(this.#keys.catalogLeases(lane, name), workerId);
    pipeline.publish(this.#keys.catalogChannel, workerId);
    await pipeline.exec();
  }

  /** How many workers hold a live lease on one tool, read now (not from any cache). */
  async liveWorkers(lane: string, name: string, now = Date.now()): Promise<number> {
    return this.#redis.zcount(this.#keys.catalogLeases(lane, name), now, '+inf');
  }

  /** Every announced tool with its lane and number of live workers; names announced in several lanes apart. */
  async snapshot(now = Date.now()): Promise<CatalogSnapshot> {
    const lanes = (await this.#redis.smembers(this.#keys.catalogLanes)).sort();
    const reads = this.#redis.pipeline();
    for (const lane of lanes) reads.hgetall(this.#keys.catalogDefinitions(lane));
    const hashes = lanes.length === 0 ? [] : ((await reads.exec()) ?? []);
    const announced: { lane: string; name: string; json: string }[] = [];
    lanes.forEach((lane, i) => {
      const hash = (hashes[i]?.[1] ?? {}) as Record<string, string>;
      for (const [name, json] of Object.entries(hash)) announced.push({ lane, name, json });
    });
    const counts = this.#redis.pipeline();
    for (const { lane, name } of announced) counts.zcount(this.#keys.catalogLeases(lane, name), now, '+inf');
    const live = announced.length === 0 ? [] : ((await counts.exec()) ?? []);
    const byName = new Map<string, CatalogEntry[]>();
    announced.forEach(({ lane, name, json }, i) => {
      const entry: CatalogEntry = { lane, json, liveWorkers: Number(live[i]?.[1] ?? 0) };
      byName.set(name, [...(byName.get(name) ?? []), entry]);
    });
    const entries = new Map<string, CatalogEntry>();
    const ambiguous = new Map<string, string[]>();
    for (const [name, found] of byName) {
      if (found.length === 1) entries.set(name, found[0]!);
      else ambiguous.set(name, found.map((e) => e.lane));
    }
    return { lanes, entries, ambiguous };
  }
}

/** The catalog as read at one moment. */
export interface CatalogSnapshot {
  /** Lanes whose workers have announced tools. */
  readonly lanes: readonly string[];
  /** Tools announced in exactly one lane. */
  readonly entries: ReadonlyMap<string, CatalogEntry>;
  /**
   * Names announced in more than one lane, with those lanes. Served by none:
   * routing to either could hand a Host tool's calls to a sandbox worker that
   * claimed its name (or the reverse).
   */
  readonly ambiguous: ReadonlyMap<string, readonly string[]>;
}
