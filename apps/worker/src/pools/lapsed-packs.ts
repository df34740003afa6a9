import type { Catalog } from '@forge-fleet/store';
import type { Logger } from 'pino';

/**
 * Prunes the catalog of its lane's worker-own packs (see directPackOf in the
 * store) whose workers are gone. A worker keeping sessions per caller adds
 * one such pack at each start, and each generation of its servers' tools
 * another; dispatchers read every pack of a lane at each catalog read, so
 * without pruning a fleet redeployed daily pays more for each read every day.
 *
 * Any worker of the lane may prune (dispatchers may not write the catalog).
 * A pack is pruned only once this worker has seen it lapsed, with no lease,
 * for `afterMs`: long past the leases of the callers' sessions it held, so no
 * worker sends calls on to it any more, and a worker that was only cut off
 * for a while has announced it again meanwhile. Its queue must hold no call
 * (see Catalog.pruneDirectPack).
 */
export class LapsedPacks {
  /** Each lapsed pack this worker saw, with when it first saw it so. */
  readonly #seen = new Map<string, number>();

  constructor(
    private readonly catalog: Catalog,
    private readonly lane: string,
    private readonly afterMs: number,
    private readonly log: Logger,
  ) {}

  /** One look: prunes what has stayed lapsed long enough, and returns the ids pruned. */
  async sweep(now = Date.now()): Promise<string[]> {
    const lapsed = new Set(await this.catalog.lapsedDirectPacks(this.lane, now));
    for (const id of this.#seen.keys()) if (!lapsed.has(id)) this.#seen.delete(id);
    const pruned: string[] = [];
    for (const id of lapsed) {
      const since = this.#seen.get(id);
      if (since === undefined) this.#seen.set(id, now);
      else if (now - since >= this.afterMs && (await this.catalog.pruneDirectPack(this.lane, id, now))) {
        this.#seen.delete(id);
        pruned.push(id);
      }
    }
    if (pruned.length > 0) this.log.info({ lane: this.lane, packs: pruned }, 'pruned the own packs of workers long gone from the catalog');
    return pruned;
  }
}
