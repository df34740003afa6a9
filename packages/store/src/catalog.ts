import { RegistryError, stableStringify, type ToolDefinition } from '@forge-fleet/shared';
import { type FleetKeys, packQueueName } from './keys.js';
import { laneQueueName, parseLane } from './lanes.js';
import { definitionHash, directPackOf, isDirectPack, packJson, packOf, parsePack, type ToolPack } from './packs.js';
import type { RedisConnection } from './redis.js';
import { ANNOUNCE_TOOLS, DROP_IDLE_QUEUE, luaScript, PRUNE_PACK, RENEW_LEASES } from './scripts.js';

/** Which pack of a worker an announcement is about. */
interface PackChoice {
  /** The operator's name of the worker's pack (`--pack`); else a hash of its tools. */
  readonly pack?: string | undefined;
  /** The worker's own pack (see directPackOf), not the pack it shares with workers like it. */
  readonly direct?: boolean | undefined;
}

/** One tool pack of a lane as the catalog holds it, with its queue's backlog. */
export interface PackEntry extends ToolPack {
  readonly lane: string;
  /** The BullMQ queue its workers take calls from. */
  readonly queue: string;
  /** Workers holding an unexpired lease on the pack. */
  readonly liveWorkers: number;
  /** Jobs in its queue no worker has taken yet. */
  readonly waiting: number;
  /** Jobs waiting out a retry backoff. */
  readonly delayed: number;
  /** Jobs a worker has taken (and may have died holding). */
  readonly active: number;
  /** A worker's own pack (see directPackOf): no new call is routed there. */
  readonly direct: boolean;
}

/** One tool as the live catalog holds it. */
export interface CatalogEntry {
  /** The lane whose workers announced it. */
  readonly lane: string;
  /** The definition as announced (stable JSON): compare it to skip re-parsing an unchanged tool. */
  readonly json: string;
  /** Workers holding an unexpired lease on a pack that serves it under this definition. */
  readonly liveWorkers: number;
  /** The packs that serve it under this very definition (live or not): where its calls may go. */
  readonly packs: readonly PackEntry[];
}

/**
 * The live tool catalog in Redis: workers announce the definitions they serve
 * and the pack they belong to under a lease they keep renewing; dispatchers
 * read definitions, packs and liveness from it. Definitions stay after their
 * workers leave, so a dispatcher can tell "no such tool" (TOOL_NOT_FOUND) from
 * "nobody serves it now" (NO_WORKER).
 *
 * Each lane has its own definitions, packs and leases, writable only by its
 * own workers' Redis users. A worker cannot see other lanes, so a name
 * announced in two lanes is caught by the dispatcher, which serves neither
 * (see {@link CatalogSnapshot.ambiguous}).
 */
export class Catalog {
  readonly #redis: RedisConnection;
  readonly #keys: FleetKeys;
  readonly #announce;
  readonly #renew;
  readonly #prune;
  readonly #dropIdleQueue;
  /** The pack of each definitions list announced through this catalog: a worker renews the same list every few seconds. */
  readonly #packs = new WeakMap<readonly ToolDefinition[], { readonly name: string | undefined; readonly pack: ToolPack }>();

  constructor(redis: RedisConnection, keys: FleetKeys) {
    this.#redis = redis;
    this.#keys = keys;
    this.#announce = luaScript<(string | number)[]>(redis, 'forgeAnnounceTools', 'variable', ANNOUNCE_TOOLS);
    this.#renew = luaScript<number>(redis, 'forgeRenewLeases', 'variable', RENEW_LEASES);
    this.#prune = luaScript<number>(redis, 'forgePrunePack', 3, PRUNE_PACK);
    this.#dropIdleQueue = luaScript<number>(redis, 'forgeDropIdleQueue', 'variable', DROP_IDLE_QUEUE);
  }

  /** Each definitions list's stable JSON, written once per list for the same reason (5,000 MCP tools are 16 MB of it). */
  readonly #jsons = new WeakMap<readonly ToolDefinition[], readonly string[]>();

  /** {@link packOf}, computed once per definitions list (hashing hundreds of definitions at every lease renewal is waste). */
  #packOf(definitions: readonly ToolDefinition[], name: string | undefined): ToolPack {
    const known = this.#packs.get(definitions);
    if (known !== undefined && known.name === name) return known.pack;
    const pack = packOf(definitions, name);
    this.#packs.set(definitions, { name, pack });
    return pack;
  }

  /** The pack an announcement is about: the worker's pack, or with `direct` its own pack (see directPackOf). */
  #packFor(definitions: readonly ToolDefinition[], workerId: string, options: PackChoice): ToolPack {
    const pack = this.#packOf(definitions, options.pack);
    return options.direct === true ? directPackOf(pack, workerId) : pack;
  }

  /** The queue a worker serving `definitions` in `lane` (in the pack named `name`, if any) takes its calls from. */
  packQueue(lane: string, definitions: readonly ToolDefinition[], name?: string): { pack: ToolPack; queue: string } {
    const pack = this.#packOf(definitions, name);
    return { pack, queue: packQueueName(laneQueueName(this.#keys.prefix, lane), pack.id) };
  }

  /**
   * Announces or renews the worker's lease on its pack and on each tool;
   * with `notify`, tells dispatchers to re-read the catalog now (a worker
   * joining); with `takeOver`, a changed definition replaces the one other
   * live workers serve (see ANNOUNCE_TOOLS) rather than being refused.
   * @throws RegistryError when a live worker serves one of the names with another definition (not with `takeOver`).
   */
  async announce(lane: string, workerId: string, definitions: readonly ToolDefinition[], leaseMs: number, options: { notify?: boolean; takeOver?: boolean } & PackChoice = {}): Promise<void> {
    const now = Date.now();
    // Registering the lane needs no atomicity with the announcement: it only tells dispatchers where to look.
    void this.#redis.sadd(this.#keys.catalogLanes, lane).catch(() => undefined);
    const pack = this.#packFor(definitions, workerId, options);
    const keys = [
      this.#keys.catalogDefinitions(lane),
      this.#keys.catalogPacks(lane),
      this.#keys.catalogPackLeases(lane, pack.id),
      this.#keys.catalogVersion(lane),
      ...definitions.map((d) => this.#keys.catalogLeases(lane, d.name)),
    ];
    const args: (string | number)[] = [workerId, now, now + leaseMs, pack.id, packJson(pack.tools), options.takeOver === true ? '1' : '0'];
    let jsons = this.#jsons.get(definitions);
    if (jsons === undefined) {
      jsons = definitions.map((d) => stableStringify(d));
      this.#jsons.set(definitions, jsons);
    }
    definitions.forEach((d, i) => args.push(d.name, jsons[i]!));
    const conflicts = await this.#announce(keys, args);
    if (conflicts.length > 0) {
      const described: string[] = [];
      let packTaken: string | undefined;
      for (let i = 0; i + 1 < conflicts.length; i += 2) {
        if (conflicts[i] === '') packTaken = String(conflicts[i + 1]);
        else described.push(`'${String(conflicts[i])}' (${String(conflicts[i + 1])} live worker(s))`);
      }
      if (described.length === 0) {
        throw new RegistryError(
          `tool pack '${pack.id}' is served by ${packTaken} live worker(s) with other tools or definitions; every worker of a named pack (--pack) must serve the same tools module — give this worker another --pack name, or stop the others first`,
          { pack: pack.id },
        );
      }
      throw new RegistryError(
        `tool ${described.join(', ')} is already served with a different definition; deploy the same definition to every worker of a tool, or stop the workers serving the old one first`,
        { tools: described },
      );
    }
    if (options.notify === true) await this.#redis.publish(this.#keys.catalogChannel, workerId);
  }

  /**
   * Renews the worker's leases on a list it announced: the leases alone while
   * they are all live (the definitions are not sent again), else the whole
   * announcement, which checks and writes them as {@link announce} does.
   * @throws RegistryError as {@link announce}, when the full announcement finds a conflict.
   */
  async renew(lane: string, workerId: string, definitions: readonly ToolDefinition[], leaseMs: number, options: PackChoice = {}): Promise<void> {
    const now = Date.now();
    const pack = this.#packFor(definitions, workerId, options);
    const keys = [
      this.#keys.catalogDefinitions(lane),
      this.#keys.catalogPacks(lane),
      this.#keys.catalogPackLeases(lane, pack.id),
      ...definitions.map((d) => this.#keys.catalogLeases(lane, d.name)),
    ];
    const args: (string | number)[] = [workerId, now, now + leaseMs, pack.id, ...definitions.map((d) => d.name)];
    if ((await this.#renew(keys, args)) !== 1) await this.announce(lane, workerId, definitions, leaseMs, options);
  }

  /**
   * Gives up the worker's leases (on shutdown), so dispatchers stop routing to it at once and re-home what its pack
   * leaves queued. `toolsOnly`: only its leases on the tools' names, the ones that refuse another definition of a
   * tool, and no word to dispatchers: its pack stays live for routing and re-homing, while the worker's next
   * generation announces a changed definition; a full withdrawal follows once that one is announced.
   */
  async withdraw(lane: string, workerId: string, definitions: readonly ToolDefinition[], pack?: string, options: { readonly toolsOnly?: boolean; readonly direct?: boolean } = {}): Promise<void> {
    if (definitions.length === 0) return;
    const pipeline = this.#redis.pipeline();
    if (options.toolsOnly !== true) {
      pipeline.zrem(this.#keys.catalogPackLeases(lane, this.#packOf(definitions, pack).id), workerId);
      // Its own pack too: dispatchers re-home what was sent on to it and not taken yet.
      if (options.direct === true) pipeline.zrem(this.#keys.catalogPackLeases(lane, this.#packFor(definitions, workerId, { pack, direct: true }).id), workerId);
    }
    for (const { name } of definitions) pipeline.zrem(this.#keys.catalogLeases(lane, name), workerId);
    if (options.toolsOnly !== true) pipeline.publish(this.#keys.catalogChannel, workerId);
    await pipeline.exec();
  }

  /**
   * Hears workers joining and leaving (their announcements with `notify`,
   * their withdrawals) on `subscriber`, a connection in subscriber mode that
   * may carry other channels too.
   */
  async onChange(subscriber: RedisConnection, listener: () => void): Promise<void> {
    const channel = this.#keys.catalogChannel;
    subscriber.on('message', (heard: string) => {
      if (heard === channel) listener();
    });
    await subscriber.subscribe(channel);
  }

  /** How many workers hold a live lease on a pack, read now (not from any cache). */
  async liveWorkers(lane: string, pack: string, now = Date.now()): Promise<number> {
    return this.#redis.zcount(this.#keys.catalogPackLeases(lane, pack), now, '+inf');
  }

  /**
   * The lane's worker-own packs (see directPackOf) that no worker holds a live lease on now: their workers stopped,
   * died, or moved to another generation's pack. Each start of a worker with a `perCaller` server adds one.
   */
  async lapsedDirectPacks(lane: string, now = Date.now()): Promise<string[]> {
    const ids = Object.keys(await this.#redis.hgetall(this.#keys.catalogPacks(lane))).filter(isDirectPack);
    if (ids.length === 0) return [];
    const leases = this.#redis.pipeline();
    for (const id of ids) leases.zcount(this.#keys.catalogPackLeases(lane, id), `(${now}`, '+inf');
    const live = (await leases.exec()) ?? [];
    return ids.filter((_, i) => live[i]?.[0] == null && Number(live[i]?.[1]) === 0);
  }

  /**
   * Removes a lapsed worker-own pack from the lane's catalog, with what BullMQ kept beside its queue, when its queue
   * holds no call: dispatchers read every pack of a lane at each catalog read, so the packs of workers long gone
   * would cost every read more with each restart. A pack whose queue still holds a call stays, for dispatchers to
   * re-home it; one that is live again stays too. The queue is looked at first, in its own slot (a Redis Cluster
   * puts it apart from the catalog): the caller makes sure that nothing sends calls there any more (its lease long
   * lapsed). Returns whether it was removed.
   */
  async pruneDirectPack(lane: string, id: string, now = Date.now()): Promise<boolean> {
    if (!isDirectPack(id)) return false;
    const queue = `${this.#keys.prefix}:${packQueueName(laneQueueName(this.#keys.prefix, lane), id)}`;
    const pending = ['wait', 'delayed', 'prioritized', 'paused', 'active', 'waiting-children', 'failed', 'completed'];
    const bookkeeping = ['meta', 'id', 'events', 'stalled-check', 'stalled', 'marker', 'pc', 'limiter', 'de', 'repeat'];
    if ((await this.#dropIdleQueue([...pending, ...bookkeeping].map((k) => `${queue}:${k}`), [])) !== 1) return false;
    return (await this.#prune([this.#keys.catalogPacks(lane), this.#keys.catalogPackLeases(lane, id), this.#keys.catalogVersion(lane)], [id, now])) === 1;
  }

  /**
   * Each lane's definitions and packs as last read, with the lane's version
   * then: read again only when an announcement changed them (a large catalog
   * is megabytes a second otherwise, with a hash of each definition).
   */
  readonly #lanesRead = new Map<string, LaneRead>();
  /** Snapshots taken; every {@link FULL_READ_EVERY}th reads every lane whatever its version. */
  #snapshots = 0;

  async #laneDefinitions(lanes: readonly string[]): Promise<LaneRead[]> {
    if (lanes.length === 0) return [];
    const full = this.#snapshots++ % FULL_READ_EVERY === 0;
    const versions = this.#redis.pipeline();
    for (const lane of lanes) versions.get(this.#keys.catalogVersion(lane));
    const versionOf = ((await versions.exec()) ?? []).map(([err, value]) => (err || typeof value !== 'string' ? undefined : value));
    // A lane without a version (announced by a worker that keeps none, or a Redis that lost the key) is read every time.
    const stale = lanes
      .map((lane, i) => ({ lane, version: versionOf[i] }))
      .filter(({ lane, version }) => full || version === undefined || this.#lanesRead.get(lane)?.version !== version);
    // The lanes read now, kept for later snapshots or not.
    const fresh = new Map<string, LaneRead>();
    if (stale.length > 0) {
      const reads = this.#redis.pipeline();
      for (const { lane } of stale) reads.hgetall(this.#keys.catalogDefinitions(lane)).hgetall(this.#keys.catalogPacks(lane));
      const hashes = (await reads.exec()) ?? [];
      stale.forEach(({ lane, version }, i) => {
        const [defError, definitions] = hashes[2 * i] ?? [];
        const [packError, packHash] = hashes[2 * i + 1] ?? [];
        // The version read before these hashes: at worst older than what they hold, so the next read looks again.
        const read: LaneRead = { version, announced: [], packs: [], skipped: [] };
        if (defError) read.skipped.push(`lane '${lane}' definitions (${String(defError)})`);
        else for (const [name, json] of Object.entries((definitions ?? {}) as Record<string, string>)) read.announced.push({ lane, name, json, hash: definitionHash(json) });
        if (packError) read.skipped.push(`lane '${lane}' packs (${String(packError)})`);
        else
          for (const [id, json] of Object.entries((packHash ?? {}) as Record<string, string>)) {
            const pack = parsePack(id, json);
            if (pack === undefined) read.skipped.push(`pack '${id.slice(0, 40)}' of lane '${lane}'`);
            else read.packs.push({ ...pack, lane, queue: packQueueName(laneQueueName(this.#keys.prefix, lane), id) });
          }
        // A lane read with errors is not kept: the next snapshot reads it again.
        if (read.skipped.length === 0 && read.version !== undefined) this.#lanesRead.set(lane, read);
        else this.#lanesRead.delete(lane);
        fresh.set(lane, read);
      });
    }
    return lanes.map((lane) => fresh.get(lane) ?? this.#lanesRead.get(lane) ?? EMPTY_LANE);
  }

  /**
   * Every announced tool with its lane, packs and live workers; names
   * announced in several lanes apart. Lane names and packs that do not parse
   * (workers write them) are skipped and returned in `skipped`.
   */
  async snapshot(now = Date.now()): Promise<CatalogSnapshot> {
    const skipped: string[] = [];
    const lanes: string[] = [];
    for (const lane of (await this.#redis.smembers(this.#keys.catalogLanes)).sort()) {
      if (parseLane(lane) === undefined) skipped.push(`lane '${lane.slice(0, 80)}'`);
      else lanes.push(lane);
    }
    const announced: { lane: string; name: string; json: string; hash: string }[] = [];
    const packs: Omit<PackEntry, 'liveWorkers' | 'waiting' | 'delayed' | 'active' | 'direct'>[] = [];
    for (const read of await this.#laneDefinitions(lanes)) {
      announced.push(...read.announced);
      packs.push(...read.packs);
      skipped.push(...read.skipped);
    }
    // Per pack: live workers (the catalog's slot), and its queue's backlog (BullMQ's lists, read directly: one command
    // each, in its lane's slot). One pipeline per slot, as a Redis Cluster requires; all in parallel.
    const leases = this.#redis.pipeline();
    for (const p of packs) leases.zcount(this.#keys.catalogPackLeases(p.lane, p.id), now, '+inf');
    const byLane = new Map<string, number[]>();
    packs.forEach((p, i) => byLane.set(p.lane, [...(byLane.get(p.lane) ?? []), i]));
    const backlog: number[][] = packs.map(() => [0, 0, 0]);
    const [live] = await Promise.all([
      packs.length === 0 ? Promise.resolve([]) : leases.exec().then((r) => r ?? []),
      ...[...byLane.values()].map(async (indexes) => {
        const reads = this.#redis.pipeline();
        for (const i of indexes) {
          const q = `${this.#keys.prefix}:${packs[i]!.queue}`;
          reads.llen(`${q}:wait`).zcard(`${q}:delayed`).llen(`${q}:active`);
        }
        const read = (await reads.exec()) ?? [];
        indexes.forEach((i, k) => (backlog[i] = [0, 1, 2].map((j) => Number(read[3 * k + j]?.[1] ?? 0))));
      }),
    ]);
    const entries: PackEntry[] = packs.map((p, i) => ({ ...p, liveWorkers: Number(live[i]?.[1] ?? 0), waiting: backlog[i]![0]!, delayed: backlog[i]![1]!, active: backlog[i]![2]!, direct: isDirectPack(p.id) }));
    const byName = new Map<string, CatalogEntry[]>();
    // A worker's own pack is where calls are sent on to it, never where a call is routed, and its worker is counted
    // in the pack it shares: a tool's entry lists the shared packs only (snapshot.packs has them all, for re-homing).
    const shared = entries.filter((p) => !p.direct);
    for (const { lane, name, json, hash } of announced) {
      const serving = shared.filter((p) => p.lane === lane && p.tools.get(name) === hash);
      const entry: CatalogEntry = { lane, json, liveWorkers: serving.reduce((sum, p) => sum + p.liveWorkers, 0), packs: serving };
      byName.set(name, [...(byName.get(name) ?? []), entry]);
    }
    const tools = new Map<string, CatalogEntry>();
    const ambiguous = new Map<string, string[]>();
    for (const [name, found] of byName) {
      if (found.length === 1) tools.set(name, found[0]!);
      else ambiguous.set(name, found.map((e) => e.lane));
    }
    return { lanes, entries: tools, ambiguous, packs: entries, skipped };
  }
}

/** One lane's definitions (with their hashes) and packs, as one snapshot read them. */
interface LaneRead {
  readonly version: string | undefined;
  readonly announced: { lane: string; name: string; json: string; hash: string }[];
  readonly packs: Omit<PackEntry, 'liveWorkers' | 'waiting' | 'delayed' | 'active' | 'direct'>[];
  readonly skipped: string[];
}

const EMPTY_LANE: LaneRead = Object.freeze({ version: undefined, announced: [], packs: [], skipped: [] });

/**
 * Every this many snapshots, every lane's definitions are read whatever its
 * version: a worker of an older release changes them without bumping it.
 */
const FULL_READ_EVERY = 30;

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
  /** Every pack of every lane, live or not (a dead pack's queue may still hold calls to re-home). */
  readonly packs: readonly PackEntry[];
  /** What could not be read and was left out (a bogus lane name a worker registered…), for the log. */
  readonly skipped: readonly string[];
}
