import { ConfigInvalidError, FreshRun } from '@forge-fleet/shared';
import type { FleetKeys } from './keys.js';
import type { RedisConnection } from './redis.js';
import { luaScript } from './scripts.js';

/** Entries kept in the stream (approximately: trimmed with `~`). */
export const AUDIT_MAX_ENTRIES = 10_000;

/** Items moved from one inbox per script run: keeps a run (which blocks Redis) short. */
const ITEMS_PER_INBOX = 256;
/**
 * How soon a keeper looks at the inboxes again after a look that filed entries; a reader asks for a drain before
 * it reads (AuditReader), so the pace only bounds how far the stream trails the workers' inboxes.
 */
const BUSY_POLL_MS = 25;
/**
 * Each look that finds the inboxes empty doubles the pause before the next, up to this: an idle dispatcher
 * looked 40 times a second, every look a script run and a wake-up of this process and of Redis (most of an
 * idle dispatcher's CPU, 34 ms a second here). The first entry after a quiet spell trails by this at most.
 */
const IDLE_POLL_MAX_MS = 400;
/**
 * How soon entries this process just wrote are filed (see AuditArchivist.soon): soon enough that the stream
 * trails the calls by a few ms, late enough that the entries of calls close together share one script run.
 * Filing each entry on its own cost a lone call two or three script runs (and as many wake-ups) of its own.
 */
const SOON_MS = 5;
/** The pause after a failed drain (Redis away): the items wait in their inboxes meanwhile. */
const FAILURE_PAUSE_MS = 1_000;

/**
 * KEYS[1] the stream, KEYS[2..] inboxes; ARGV[1] the stream's MAXLEN, ARGV[2] items per inbox, ARGV[3..] each
 * inbox's writer. Moves each inbox's oldest items to the stream in order, marked with their writer, and only
 * then trims them off the inbox — in one script, so an item is never lost between the two, nor filed twice.
 * An item that is not `audit|risk\n<text>` (a compromised writer's) is filed as kind `invalid`, never dropped.
 */
const FILE_ITEMS = `local moved = 0
local limit = tonumber(ARGV[2])
for i = 2, #KEYS do
  local items = redis.call('LRANGE', KEYS[i], 0, limit - 1)
  for _, item in ipairs(items) do
    local nl = string.find(item, '\\n', 1, true)
    local kind, entry = 'invalid', item
    if nl then
      local k = string.sub(item, 1, nl - 1)
      if k == 'audit' or k == 'risk' then kind, entry = k, string.sub(item, nl + 1) end
    end
    redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', 'kind', kind, 'entry', entry, 'writer', ARGV[i + 1])
  end
  if #items > 0 then redis.call('LTRIM', KEYS[i], #items, -1) end
  moved = moved + #items
end
return moved`;

export interface AuditArchivistOptions {
  /**
   * A connection as the audit keeper's Redis user (`<prefix>-audit`): the one user that may write the stream.
   * Nobody else's credentials can trim or delete it.
   */
  readonly redis: RedisConnection;
  readonly keys: FleetKeys;
  /** The writers whose inboxes to drain besides the dispatchers' own: the lanes the catalog knows. */
  readonly lanes: () => Iterable<string>;
  readonly log: { error(fields: object, message: string): void };
}

/**
 * The audit keeper: files the entries the fleet's writers left in their
 * inboxes (see AuditInbox) into the audit stream, each with the writer its
 * inbox belongs to, so a worker cannot pass its entries off as a dispatcher's.
 * Every dispatcher runs one; drains are single scripts, so several keepers
 * side by side neither lose nor double an entry. The inboxes share the
 * stream's hash tag: one slot, on a Redis Cluster too.
 */
export class AuditArchivist {
  readonly #o: AuditArchivistOptions;
  readonly #file: (keys: readonly string[], args: readonly (string | number)[]) => Promise<number>;
  #running = false;
  #timer: NodeJS.Timeout | undefined;
  /** Drains, one at a time, each begun after its callers asked (see FreshRun). */
  readonly #drains = new FreshRun(() => this.#drainAll());
  /** When the scheduled look runs (performance.now() time). */
  #dueAt = 0;
  /** This process wrote entries while a look was under way (see soon). */
  #wanted = false;
  /** The pause before the next look (see IDLE_POLL_MAX_MS). */
  #pollMs = BUSY_POLL_MS;

  constructor(options: AuditArchivistOptions) {
    this.#o = options;
    this.#file = luaScript<number>(options.redis, 'forgeFileAudit', 'variable', FILE_ITEMS);
  }

  /**
   * Drains once (so a keeper without the audit keeper's permissions fails here, at start), then keeps draining.
   * @throws ConfigInvalidError when this connection's Redis user may not write the audit stream.
   */
  async start(): Promise<void> {
    try {
      await this.drain();
    } catch (error) {
      if (error instanceof Error && error.message.includes('NOPERM')) {
        throw new ConfigInvalidError('audit keeper', [
          `this dispatcher's Redis user may not file audit entries (${error.message.split('\n')[0]}): set FORGE_AUDIT_REDIS_URL to the URL of the audit keeper's user (<prefix>-audit in the ACL that \`npm run redis:acl\` makes)`,
        ]);
      }
      throw error;
    }
    this.#running = true;
    this.#schedule(0);
  }

  stop(): void {
    this.#running = false;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
  }

  /**
   * Files what the inboxes hold now (until they are empty); resolves with the number of items moved.
   * A drain under way may have read the inboxes before the caller's last write, so a caller who comes
   * during one gets the drain after it (shared with the others who came meanwhile), never the one under
   * way: a reader that drains first sees every entry written before it asked.
   */
  drain(): Promise<number> {
    return this.#drains.run();
  }

  async #drainAll(): Promise<number> {
    const { keys } = this.#o;
    const writers = ['dispatcher', ...new Set(this.#o.lanes())];
    const inboxes = writers.map((w) => keys.auditInbox(w));
    let total = 0;
    for (;;) {
      const moved = Number(await this.#file([keys.audit, ...inboxes], [AUDIT_MAX_ENTRIES, ITEMS_PER_INBOX, ...writers]));
      total += moved;
      if (moved < ITEMS_PER_INBOX) return total;
    }
  }

  /**
   * Files within {@link SOON_MS}, without waiting for the next look: this process just wrote entries (the
   * dispatcher's own writer calls it), so they reach the stream a few ms after their write.
   */
  soon(): void {
    if (!this.#running) return;
    // A drain under way may have read the inboxes before this write: the look after it comes soon, not idly.
    if (this.#timer === undefined) {
      this.#wanted = true;
      return;
    }
    if (this.#dueAt - performance.now() <= SOON_MS) return; // due within SOON_MS anyway
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#schedule(SOON_MS);
  }

  #schedule(ms: number): void {
    if (!this.#running) return;
    this.#dueAt = performance.now() + ms;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#wanted = false;
      // A drain that returned has emptied the inboxes as they were when it ran (#drainAll loops while a run
      // is full): what came after is filed at the next look, or within SOON_MS of a write of this process.
      this.drain().then(
        (moved) => {
          this.#pollMs = moved > 0 ? BUSY_POLL_MS : Math.min(this.#pollMs * 2, IDLE_POLL_MAX_MS);
          this.#schedule(this.#wanted ? SOON_MS : this.#pollMs);
        },
        (err: unknown) => {
          this.#o.log.error({ err }, 'could not file audit entries; they wait in their inboxes');
          this.#schedule(FAILURE_PAUSE_MS);
        },
      );
    }, ms);
    this.#timer.unref();
  }
}
