import { type FleetKeys, RegistryError, stableStringify, type ToolDefinition } from '@forge-fleet/shared';
import type { Redis } from 'ioredis';
import { ANNOUNCE_TOOLS, luaScript } from './scripts.js';

/** One tool as the live catalog holds it. */
export interface CatalogEntry {
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
 */
export class Catalog {
  readonly #redis: Redis;
  readonly #keys: FleetKeys;
  readonly #announce;

  constructor(redis: Redis, keys: FleetKeys) {
    this.#redis = redis;
    this.#keys = keys;
    this.#announce = luaScript<(string | number)[]>(redis, 'forgeAnnounceTools', 'variable', ANNOUNCE_TOOLS);
  }

  /**
   * Announces or renews the worker's lease on each tool; with `notify`,
   * tells dispatchers to re-read the catalog now (a worker joining).
   * @throws RegistryError when a live worker serves one of the names with another definition.
   */
  async announce(workerId: string, definitions: readonly ToolDefinition[], leaseMs: number, options: { notify?: boolean } = {}): Promise<void> {
    const now = Date.now();
    const keys = [this.#keys.catalogDefinitions, ...definitions.map((d) => this.#keys.catalogLeases(d.name))];
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
  async withdraw(workerId: string, names: readonly string[]): Promise<void> {
    if (names.length === 0) return;
    const pipeline = this.#redis.pipeline();
    for (const name of names) pipeline.zrem(this.#keys.catalogLeases(name), workerId);
    pipeline.publish(this.#keys.catalogChannel, workerId);
    await pipeline.exec();
  }

  /** How many workers hold a live lease on one tool, read now (not from any cache). */
  async liveWorkers(name: string, now = Date.now()): Promise<number> {
    return this.#redis.zcount(this.#keys.catalogLeases(name), now, '+inf');
  }

  /** Every announced tool with its number of live workers. */
  async snapshot(now = Date.now()): Promise<Map<string, CatalogEntry>> {
    const raw = await this.#redis.hgetall(this.#keys.catalogDefinitions);
    const names = Object.keys(raw);
    const pipeline = this.#redis.pipeline();
    for (const name of names) pipeline.zcount(this.#keys.catalogLeases(name), now, '+inf');
    const counts = names.length === 0 ? [] : ((await pipeline.exec()) ?? []);
    const entries = new Map<string, CatalogEntry>();
    names.forEach((name, i) => {
      const [, count] = counts[i] ?? [null, 0];
      entries.set(name, { json: raw[name] ?? 'null', liveWorkers: Number(count) });
    });
    return entries;
  }
}
