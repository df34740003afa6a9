import { FreshRun, isFleetError, laneOf, LoopSlice, NoWorkerError, parseToolDefinition, RegistryError, TIERS, type FleetError, type ToolDefinition, ToolNotFoundError } from '@forge-fleet/shared';
import { type Catalog, type CatalogSnapshot, laneQueueName, type PackEntry, parseLane, type RedisConnection } from '@forge-fleet/store';
import type { Logger } from 'pino';

interface Entry {
  readonly lane: string;
  readonly json: string;
  readonly definition: ToolDefinition;
  readonly liveWorkers: number;
  /** The packs serving the tool under this definition, live or not. */
  readonly packs: readonly PackEntry[];
}

/** A catalog definition this view refused, with why: kept until the announcement changes. */
interface Refused {
  readonly json: string;
  readonly error: FleetError;
}

/** Told each catalog read, after the view took it in. */
export type CatalogListener = (snapshot: CatalogSnapshot) => void;

/** Reads a miss causes start at least this long apart, so unknown names cannot flood Redis. */
const MISS_REFRESH_MS = 100;

/**
 * The dispatcher's copy of the live catalog, re-read every `refreshMs` (and at
 * once, throttled, when a call names a tool it does not know or that has no
 * worker). Lookups on the request path are synchronous map reads.
 */
export class CatalogView {
  #entries = new Map<string, Entry>();
  #timer: NodeJS.Timeout | undefined;
  /** Catalog reads, one at a time, each begun after its callers asked: it holds every announcement made before then. */
  readonly #reads = new FreshRun(() => this.#read());
  /** The rest of the gap before a read a miss asks for (see ensure), shared by the calls waiting on it. */
  #pause: Promise<void> | undefined;
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
  async start(changes?: { subscriber: RedisConnection }): Promise<void> {
    if (changes !== undefined) {
      await this.catalog.onChange(changes.subscriber, () => {
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

  /**
   * Re-reads the catalog, in a read begun after this call (see FreshRun): a
   * read under way may predate the change a notification or a call is about.
   * `asked` (performance.now() time) lets a call that waited share a read begun since it asked.
   */
  refresh(asked?: number): Promise<void> {
    return this.#reads.run(asked);
  }

  async #read(): Promise<void> {
    this.#dirty = false;
    const snapshot = await this.catalog.snapshot();
    const next = new Map<string, Entry>();
    const refused = new Map<string, Refused>();
    const slice = new LoopSlice();
    for (const [name, { lane, json, liveWorkers, packs }] of snapshot.entries) {
      const previous = this.#entries.get(name);
      if (previous?.json === json && previous.lane === lane) {
        next.set(name, { ...previous, liveWorkers, packs });
        continue;
      }
      // A definition refused once is refused again: neither parse it (its schema is tried on values) nor log it each read.
      const refusedBefore = this.#refused.get(name);
      if (refusedBefore?.json === json) {
        refused.set(name, refusedBefore);
        continue;
      }
      // Compiling a list of new schemas takes time (schema-size.ts): calls are answered between them, from the catalog read before.
      await slice.pause();
      try {
        // Parsing compiles the schemas once per distinct definition, not per refresh.
        const definition = parseToolDefinition(JSON.parse(json), { strict: false });
        // A tool's tier and pool are those of the lane it was announced in: a worker can write only its own lane,
        // so a definition claiming another tier is not to be believed.
        if (laneOf(definition.tier, definition.pool) !== lane) {
          this.log.error({ tool: name, lane, claims: laneOf(definition.tier, definition.pool) }, 'ignoring a tool announced in a lane its definition does not belong to');
          continue;
        }
        next.set(name, { lane, json, definition, liveWorkers, packs });
      } catch (err) {
        this.log.warn({ err, tool: name }, 'ignoring a catalog definition this dispatcher cannot read');
        if (isFleetError(err)) refused.set(name, { json, error: err });
      }
    }
    this.#refused = refused;
    for (const [name, lanes] of snapshot.ambiguous) {
      if (!this.#ambiguous.has(name)) this.log.error({ tool: name, lanes }, 'a tool name is announced by workers of several queues; serving none until only one does');
    }
    const skipped = snapshot.skipped.join('; ');
    if (skipped !== '' && skipped !== this.#skipped) this.log.warn({ skipped: snapshot.skipped }, 'catalog entries that cannot be read were left out (written by a misbehaving worker?)');
    this.#skipped = skipped;
    this.#ambiguous = new Map(snapshot.ambiguous);
    this.#lanes = snapshot.lanes;
    this.#entries = next;
    for (const listener of this.#listeners) listener(snapshot);
  }

  /** Definitions announced but refused (an invalid schema): a call to one is told why, not that the tool is unknown. */
  #refused = new Map<string, Refused>();
  #ambiguous = new Map<string, readonly string[]>();
  #lanes: readonly string[] = [];
  #skipped = '';
  readonly #listeners: CatalogListener[] = [];

  /**
   * Hears every catalog read, after this view took it in (the reply inbox
   * follows the lanes; the stranded-call sweep looks for packs without workers).
   */
  onRead(listener: CatalogListener): void {
    this.#listeners.push(listener);
  }

  /** Every tier's lane, and every lane whose workers have announced tools (host pools). */
  lanes(): string[] {
    return [...new Set<string>([...TIERS, ...this.#lanes])];
  }

  /**
   * Before a call's lookup: when workers joined or left since the last read,
   * or when `name` is unknown or unserved, waits for a read begun after this
   * call came — a worker that has announced its tools (and so said it is
   * ready) is found by the next call, however recently the view was read.
   * Reads a miss causes start at least MISS_REFRESH_MS apart (a call waits
   * out the rest of that pause), shared by every call waiting meanwhile.
   */
  async ensure(name: string): Promise<void> {
    const asked = performance.now();
    if (this.#dirty) return this.refresh(asked);
    const entry = this.#entries.get(name);
    if (entry !== undefined && entry.liveWorkers > 0) return;
    const wait = this.#reads.startedAt + MISS_REFRESH_MS - performance.now();
    if (wait > 0) {
      this.#pause ??= new Promise<void>((resolve) => setTimeout(resolve, wait)).finally(() => (this.#pause = undefined));
      await this.#pause;
    }
    // The calls that waited out one pause share the read begun after it.
    await this.refresh(asked);
  }

  /**
   * The definition of a servable tool.
   * @throws InvalidDefinitionError (or the error its definition was refused with) when it was announced with a definition this dispatcher refuses.
   * @throws ToolNotFoundError when no worker ever announced it.
   * @throws NoWorkerError when no live worker serves it now.
   */
  lookup(name: string): ToolDefinition {
    const lanes = this.#ambiguous.get(name);
    if (lanes !== undefined) {
      throw new RegistryError(`tool '${name}' is announced by workers of several queues (${lanes.join(', ')}); it is served by none until the workers of all but one stop announcing it`, { tool: name, lanes: [...lanes] });
    }
    const entry = this.#entries.get(name);
    const refused = this.#refused.get(name);
    if (entry === undefined && refused !== undefined) throw refused.error;
    if (entry === undefined) {
      throw new ToolNotFoundError(name, { known: this.list().map((d) => d.name), remedy: "no worker has announced it — check the name, or start a worker whose tools module defines it (--tools) or whose servers file places in its lane a server that lists it (--mcp); a server still on its first start lists its tools once it is up (its worker's /readyz names it 'starting')" });
    }
    if (entry.liveWorkers === 0) throw new NoWorkerError(name, laneQueueName(this.prefix, entry.lane), { lane: parseLane(entry.lane) });
    return entry.definition;
  }

  /** The packs that serve a tool under the definition this view holds for it, live or not (none for unknown or ambiguous names). */
  packsOf(name: string): readonly PackEntry[] {
    return this.#ambiguous.has(name) ? [] : (this.#entries.get(name)?.packs ?? []);
  }

  /**
   * The definition of a known tool, served or not (a call approved while no
   * worker is live waits in its queue). `undefined` for unknown or ambiguous names.
   */
  definitionOf(name: string): ToolDefinition | undefined {
    return this.#ambiguous.has(name) ? undefined : this.#entries.get(name)?.definition;
  }

  /** Definitions of the tools some live worker serves, sorted by name. */
  list(): ToolDefinition[] {
    return [...this.#entries.values()]
      .filter((e) => e.liveWorkers > 0)
      .map((e) => e.definition)
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }
}
