import { laneOf, NoWorkerError, parseToolDefinition, TIERS, type ToolDefinition, ToolNotFoundError } from '@forge-fleet/shared';
import { type Catalog, queueFor } from '@forge-fleet/store';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';

interface Entry {
  readonly json: string;
  readonly definition: ToolDefinition;
  readonly liveWorkers: number;
}

/** After a miss, wait at least this long before asking Redis again, so unknown names cannot flood it. */
const MISS_REFRESH_MS = 100;

/**
 * The dispatcher's copy of the live catalog, re-read every `refreshMs` (and at
 * once, throttled, when a call names a tool it does not know or that has no
 * worker). Lookups on the request path are synchronous map reads.
 */
export class CatalogView {
  #entries = new Map<string, Entry>();
  #timer: NodeJS.Timeout | undefined;
  #lastRefresh = 0;
  #refreshing: Promise<void> | undefined;
  /** Set when a worker said it joined or left; the next lookup re-reads first. */
  #dirty = false;

  constructor(
    private readonly catalog: Catalog,
    private readonly prefix: string,
    private readonly refreshMs: number,
    private readonly log: Logger,
  ) {}

  /**
   * Reads the catalog, then keeps it fresh: periodically, and at once when
   * `changes` (a subscriber connection) hears a worker join or leave.
   */
  async start(changes?: { subscriber: Redis; channel: string }): Promise<void> {
    if (changes !== undefined) {
      await changes.subscriber.subscribe(changes.channel);
      changes.subscriber.on('message', () => {
        this.#dirty = true;
        this.refresh().catch((err: unknown) => this.log.error({ err }, 'catalog refresh failed'));
      });
    }
    await this.refresh();
    this.#timer = setInterval(() => {
      this.refresh().catch((err: unknown) => this.log.error({ err }, 'catalog refresh failed'));
    }, this.refreshMs);
  }

  stop(): void {
    clearInterval(this.#timer);
  }

  /** Re-reads the catalog; concurrent callers share one read. */
  refresh(): Promise<void> {
    this.#refreshing ??= this.#read().finally(() => (this.#refreshing = undefined));
    return this.#refreshing;
  }

  async #read(): Promise<void> {
    this.#dirty = false;
    const snapshot = await this.catalog.snapshot();
    const next = new Map<string, Entry>();
    for (const [name, { json, liveWorkers }] of snapshot) {
      const previous = this.#entries.get(name);
      if (previous?.json === json) {
        next.set(name, { ...previous, liveWorkers });
        continue;
      }
      try {
        // Parsing compiles the schemas once per distinct definition, not per refresh.
        next.set(name, { json, definition: parseToolDefinition(JSON.parse(json), { strict: false }), liveWorkers });
      } catch (err) {
        this.log.warn({ err, tool: name }, 'ignoring a catalog definition this dispatcher cannot read');
      }
    }
    this.#entries = next;
    this.#lastRefresh = Date.now();
    this.onLanes?.(this.lanes());
  }

  /** Told the lanes after every read (the dispatcher's reply inbox reads one list per lane). */
  onLanes: ((lanes: string[]) => void) | undefined;

  /** Every tier's lane, and one per host pool some known tool names. */
  lanes(): string[] {
    const lanes = new Set<string>(TIERS);
    for (const { definition } of this.#entries.values()) lanes.add(laneOf(definition.tier, definition.pool));
    return [...lanes];
  }

  /**
   * Refreshes first when workers joined or left since the last read, or when
   * `name` is unknown or unserved and the last read is not brand new.
   */
  async ensure(name: string): Promise<void> {
    if (this.#dirty) return this.refresh();
    const entry = this.#entries.get(name);
    if ((entry === undefined || entry.liveWorkers === 0) && Date.now() - this.#lastRefresh >= MISS_REFRESH_MS) await this.refresh();
  }

  /**
   * The definition of a servable tool.
   * @throws ToolNotFoundError when no worker ever announced it.
   * @throws NoWorkerError when no live worker serves it now.
   */
  lookup(name: string): ToolDefinition {
    const entry = this.#entries.get(name);
    if (entry === undefined) {
      throw new ToolNotFoundError(name, { known: this.list().map((d) => d.name), remedy: 'no worker has announced it — check the name, or start a worker whose tools module defines it' });
    }
    if (entry.liveWorkers === 0) throw new NoWorkerError(name, queueFor(this.prefix, entry.definition));
    return entry.definition;
  }

  /** Definitions of the tools some live worker serves, sorted by name. */
  list(): ToolDefinition[] {
    return [...this.#entries.values()]
      .filter((e) => e.liveWorkers > 0)
      .map((e) => e.definition)
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }
}
