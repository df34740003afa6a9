import type { PackEntry, Route } from '@forge-fleet/store';
import type { CatalogView } from '../catalog/catalog-view.js';

/**
 * Picks the queue each call goes to: among the packs whose live workers serve
 * its tool (under the definition it was admitted with), the one with the
 * least backlog per live worker. The backlog is the pack queue's waiting jobs
 * as of the last catalog read, plus what this dispatcher sent there since; so
 * between two reads a burst spreads over the packs instead of piling onto the
 * one that looked emptiest. Ties go round-robin.
 *
 * This is where per-tool limits and per-caller fairness will choose among
 * queues too: a route is asked for per call, with the call's tool.
 */
export class PackRouter {
  readonly #catalog: CatalogView;
  /** Jobs' worth of calls sent per queue since the last catalog read. */
  #sent = new Map<string, number>();
  #turn = 0;

  constructor(catalog: CatalogView) {
    this.#catalog = catalog;
    // A fresh read carries the queues' backlog: what was sent before it is counted there.
    catalog.onRead(() => (this.#sent = new Map()));
  }

  /** Where a call of `tool` goes now, or `undefined` when no live worker serves it. */
  route(tool: string, avoid?: string): Route | undefined {
    const live = this.#catalog.packsOf(tool).filter((p) => p.liveWorkers > 0 && p.queue !== avoid);
    const best = this.#pick(live);
    if (best === undefined) return undefined;
    this.#sent.set(best.queue, (this.#sent.get(best.queue) ?? 0) + 1);
    return { queue: best.queue, pack: best.id };
  }

  #pick(packs: readonly PackEntry[]): PackEntry | undefined {
    if (packs.length <= 1) return packs[0];
    let best: PackEntry | undefined;
    let bestLoad = Infinity;
    const start = this.#turn++ % packs.length;
    for (let k = 0; k < packs.length; k++) {
      const p = packs[(start + k) % packs.length]!;
      const load = (p.waiting + (this.#sent.get(p.queue) ?? 0)) / p.liveWorkers;
      if (load < bestLoad) {
        best = p;
        bestLoad = load;
      }
    }
    return best;
  }
}
