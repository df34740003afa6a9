import { MAX_TIMEOUT_MS, RegistryError, type Tool } from '@forge-fleet/shared';
import { packOf } from '@forge-fleet/store';
import type { Logger } from 'pino';
import type { WorkerPool } from './worker-pool.js';

/** How long a generation replaced by a change of tools may finish its calls when its tools name no timeout: MCP's call timeout. */
const DRAIN_DEFAULT_MS = 60_000;

/**
 * The least time between two generations. A generation is a pool with its
 * own queue, Redis connections and announcements, and the one it replaces
 * drains for as long as its calls run; a server whose tool list changes all
 * the time (measured: 1,500 changes 5 ms apart made 72 generations in 11 s)
 * would otherwise keep the worker starting pools. Changes that come closer
 * together are taken as one, the newest.
 */
export const RETOOL_MIN_INTERVAL_MS = 1000;

/**
 * The worker's pool over a set of tools that may change while it runs (an
 * MCP server came up late, changed its `tools/list`, or crash-looped).
 *
 * A tool pack is a fixed set of tools with one queue (see packs in
 * packages/store), so a change of tools is a new pack: a new generation of
 * {@link WorkerPool} with the new tools is started first, then the old one
 * withdraws its leases (dispatchers re-home what its queue still holds) and
 * finishes the calls it has — no call is dropped and the tools that stayed
 * are never without a worker. Only when the new generation is refused because
 * the old one (or another worker of the same server) still serves a tool under
 * its old definition does the old one step aside first: it gives up its
 * leases without telling dispatchers, the new one is announced taking the
 * tool's name over, and then the old one stops as above. Changes are taken
 * one at a time, the newest last.
 */
export class ServingPool {
  readonly #make: (tools: readonly Tool[], id: string, options?: { takeOverDefinitions?: boolean }) => WorkerPool;
  readonly #baseId: string;
  readonly #log: Logger;
  readonly #shutdownGraceMs: number;
  #current: WorkerPool | undefined;
  #currentTools: readonly Tool[] = [];
  #generation = 0;
  readonly #draining = new Set<Promise<void>>();
  #changes: Promise<void> = Promise.resolve();
  /** The newest tools asked for that no change has taken yet, and the change that will take them. */
  #pending: { tools: readonly Tool[]; change: Promise<void> } | undefined;
  #lastGenerationAt = Number.NEGATIVE_INFINITY;
  /** Ends the wait between generations at once (on stop). */
  #cutWait: (() => void) | undefined;
  #stopping = false;

  constructor(options: { make: (tools: readonly Tool[], id: string, options?: { takeOverDefinitions?: boolean }) => WorkerPool; id: string; shutdownGraceMs: number; log: Logger }) {
    this.#make = options.make;
    this.#baseId = options.id;
    this.#log = options.log;
    this.#shutdownGraceMs = options.shutdownGraceMs;
  }

  /** Starts serving `tools` (none: nothing is announced until some come). */
  async start(tools: readonly Tool[]): Promise<void> {
    if (tools.length === 0) {
      // Said in the words of a pool that started, which is what people and scripts wait for: the worker is up.
      this.#log.info({ tools: [], workerId: this.#baseId }, 'worker pool ready (no tools to serve yet)');
      return;
    }
    const pool = this.#make(tools, this.#baseId);
    this.#current = pool;
    this.#currentTools = tools;
    await pool.start();
  }

  /**
   * Serves `tools` from now on, in a new generation when they differ from what
   * is served. Changes are taken one at a time and at most one per
   * {@link RETOOL_MIN_INTERVAL_MS}; a change asked for while another waits
   * replaces it (the newest set is the one served), and both callers' promises
   * settle with the change that takes it.
   */
  retool(tools: readonly Tool[]): Promise<void> {
    if (this.#pending !== undefined) {
      this.#pending.tools = tools;
      return this.#pending.change;
    }
    const change = this.#changes.then(async () => {
      await this.#spaced();
      const taken = this.#pending?.tools ?? tools;
      this.#pending = undefined;
      await this.#retool(taken);
    });
    this.#pending = { tools, change };
    this.#changes = change.catch(() => undefined);
    return change;
  }

  /** Waits out what is left of the interval since the last generation began; at once when stopping. */
  async #spaced(): Promise<void> {
    const wait = this.#lastGenerationAt + RETOOL_MIN_INTERVAL_MS - Date.now();
    if (wait <= 0 || this.#stopping) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, wait);
      this.#cutWait = () => {
        clearTimeout(timer);
        resolve();
      };
    });
    this.#cutWait = undefined;
  }

  async #retool(tools: readonly Tool[]): Promise<void> {
    if (this.#stopping) return;
    const before = this.#currentTools.length === 0 ? undefined : packOf(this.#currentTools.map((t) => t.definition)).id;
    const after = tools.length === 0 ? undefined : packOf(tools.map((t) => t.definition)).id;
    if (before === after) {
      // Same definitions: the executors may be new objects, but they reach the same servers.
      return;
    }
    const old = this.#current;
    const oldTools = this.#currentTools;
    if (tools.length === 0) {
      this.#current = undefined;
      this.#currentTools = [];
      if (old !== undefined) this.#drain(old, oldTools);
      this.#log.info('no tools to serve any more; the worker announces none');
      return;
    }
    this.#generation += 1;
    this.#lastGenerationAt = Date.now();
    const id = `${this.#baseId}.g${this.#generation}`;
    let next = this.#make(tools, id);
    try {
      await next.start();
    } catch (err) {
      await next.stop({ graceMs: 0 }).catch(() => undefined);
      if (!(err instanceof RegistryError) || old === undefined) throw err;
      // The old generation holds a tool under the definition that changed: it gives up its leases first, quietly,
      // and stops (telling dispatchers, who re-home what its queue holds) only once the new one is announced, so the
      // calls queued for it find the new generation rather than no worker.
      this.#log.info({ err: err.message }, 'a tool changed its definition; the old generation steps aside before the new one starts');
      await old.stepAside();
      // Other workers of the server may serve the tool as it was, each waiting for the others to let go: a change of
      // a server's list is the server's, so this generation takes the tool's name over (the others take the change
      // as their own instances tell them of it).
      next = this.#make(tools, `${id}b`, { takeOverDefinitions: true });
      try {
        await next.start();
      } catch (again) {
        await next.stop({ graceMs: 0 }).catch(() => undefined);
        // Refused again (a named pack whose other workers serve the previous set on the same queue): this worker
        // serves its previous set again, rather than nothing, until the change can be served.
        const previous = this.#make(oldTools, `${id}c`);
        await previous.start();
        this.#current = previous;
        this.#currentTools = oldTools;
        this.#drain(old, oldTools);
        throw again;
      }
      this.#current = next;
      this.#currentTools = tools;
      this.#drain(old, oldTools);
      this.#log.info({ tools: tools.map((t) => t.definition.name), workerId: `${id}b` }, 'tools changed: serving the new set');
      return;
    }
    this.#current = next;
    this.#currentTools = tools;
    if (old !== undefined) this.#drain(old, oldTools);
    this.#log.info({ tools: tools.map((t) => t.definition.name), workerId: id }, 'tools changed: serving the new set');
  }

  #drain(pool: WorkerPool, tools: readonly Tool[]): void {
    const done = pool
      .stop({ graceMs: this.#graceFor(tools) })
      .catch((err: unknown) => this.#log.error({ err }, 'the replaced pool did not stop cleanly'))
      .finally(() => this.#draining.delete(done));
    this.#draining.add(done);
  }

  /** A replaced generation's calls may run as long as their tools allow: the longest timeout of them. */
  #graceFor(tools: readonly Tool[]): number {
    const longest = Math.max(DRAIN_DEFAULT_MS, ...tools.map((t) => t.definition.timeoutMs ?? 0));
    return Math.min(MAX_TIMEOUT_MS, Math.max(this.#shutdownGraceMs, longest));
  }

  /** Whether it takes calls: its current generation is ready (false while it serves nothing). */
  get ready(): boolean {
    return this.#current?.ready ?? false;
  }

  /** The tools served now. */
  get tools(): readonly Tool[] {
    return this.#currentTools;
  }

  /** Stops every generation, each as WorkerPool.stop does (after the shutdown grace, what still runs is aborted). */
  async stop(): Promise<void> {
    this.#stopping = true;
    this.#cutWait?.();
    await this.#changes;
    await Promise.all([this.#current?.stop(), ...this.#draining]);
  }
}
