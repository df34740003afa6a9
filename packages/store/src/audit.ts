import type { AuditDecision, AuditEntry, AuditLogger, AuditRejectionCategory, RiskSignal, RiskSignalQueue } from '@forge-fleet/shared';
import { AUDIT_MAX_ENTRIES, type AuditArchivist } from './audit-archivist.js';
import { AuditInbox } from './audit-inbox.js';
import { type FleetKeys } from './keys.js';
import type { RedisConnection } from './redis.js';

export { AUDIT_MAX_ENTRIES };

/**
 * Audit entries of one writer — the dispatchers (`dispatcher`) or one lane's
 * workers (the lane) — through that writer's inbox, filed into the audit
 * stream by the audit keeper (AuditArchivist) with the writer's name. The
 * stream is readable by any tool that speaks Redis (`XRANGE
 * <prefix>:{<prefix>.audit} - +`) and by {@link AuditReader}. A record
 * resolves once its entry is in the inbox: written, and beyond the writer's
 * reach to take back.
 */
export class RedisAuditLogger implements AuditLogger {
  readonly #inbox: AuditInbox;
  readonly #afterWrite: (() => void) | undefined;

  /** `options.afterWrite`: told after each write lands (a dispatcher files its own entries at once: AuditArchivist.soon). */
  constructor(redis: RedisConnection, keys: FleetKeys, writer: string, options: { readonly afterWrite?: () => void } = {}) {
    this.#inbox = new AuditInbox(redis, keys.auditInbox(writer));
    this.#afterWrite = options.afterWrite;
  }

  async record(entry: AuditEntry): Promise<void> {
    await this.#inbox.push('audit', JSON.stringify(entry));
    this.#afterWrite?.();
  }
}

/** Risk signals go the same way as audit entries, marked as such; writing never blocks the call path. */
export class RedisRiskSignalQueue implements RiskSignalQueue {
  readonly #inbox: AuditInbox;

  constructor(
    redis: RedisConnection,
    keys: FleetKeys,
    writer: string,
    private readonly onError: (error: unknown) => void = () => {},
  ) {
    this.#inbox = new AuditInbox(redis, keys.auditInbox(writer));
  }

  push(signal: RiskSignal): void {
    this.#inbox.push('risk', JSON.stringify(signal)).catch(this.onError);
  }
}

/** Which audit entries {@link AuditReader.query} returns; every field narrows. */
export interface AuditFilter {
  readonly callId?: string | undefined;
  readonly caller?: string | undefined;
  readonly tool?: string | undefined;
  /** Entries without a `decision` (older writers) count as `rejected`. */
  readonly decision?: AuditDecision | undefined;
  /** A rejection category; `forged` also matches older `errorCategory: "forged_call"` entries. */
  readonly category?: AuditRejectionCategory | undefined;
  /** Epoch milliseconds, inclusive. */
  readonly since?: number | undefined;
  /** Epoch milliseconds, inclusive. */
  readonly until?: number | undefined;
  /** Most entries returned. */
  readonly limit: number;
}

/** An entry as read back: its stream id (`<ms>-<seq>`) and the entry. */
export type StoredAuditEntry = AuditEntry & { readonly id: string; readonly writer?: string };

/** Entries read per XREVRANGE while filtering. */
const PAGE = 500;

function categoryOf(entry: AuditEntry): AuditRejectionCategory | undefined {
  if (entry.category !== undefined) return entry.category;
  if (entry.errorCategory === 'forged_call') return 'forged';
  return entry.errorCategory;
}

function matches(entry: AuditEntry, f: AuditFilter): boolean {
  return (
    (f.callId === undefined || entry.callId === f.callId) &&
    (f.caller === undefined || entry.caller === f.caller) &&
    (f.tool === undefined || entry.tool === f.tool) &&
    (f.decision === undefined || (entry.decision ?? 'rejected') === f.decision) &&
    (f.category === undefined || categoryOf(entry) === f.category)
  );
}

/**
 * Reads the audit stream newest first. The time window maps onto stream ids
 * (their first part is the entry's epoch ms); the other filters are applied while
 * paging back through the window, which holds at most {@link AUDIT_MAX_ENTRIES} entries.
 * Risk signals share the stream and are skipped.
 */
export class AuditReader {
  /** `archivist`: drained before each read, so a query sees every entry written before it. */
  constructor(
    private readonly redis: RedisConnection,
    private readonly keys: FleetKeys,
    private readonly archivist?: AuditArchivist,
  ) {}

  async query(f: AuditFilter): Promise<StoredAuditEntry[]> {
    // Best effort: a keeper that cannot reach Redis now leaves the entries where they are, and the read goes on.
    await this.archivist?.drain().catch(() => 0);
    const found: StoredAuditEntry[] = [];
    const floor = f.since === undefined ? '-' : String(f.since);
    let ceiling = f.until === undefined ? '+' : `${f.until}-${Number.MAX_SAFE_INTEGER}`;
    // The window is capped (MAXLEN); the page bound only guards a stream someone filled by hand.
    for (let pages = 0; pages < Math.ceil((AUDIT_MAX_ENTRIES * 2) / PAGE); pages++) {
      const page = await this.redis.xrevrange(this.keys.audit, ceiling, floor, 'COUNT', PAGE);
      for (const [id, fields] of page) {
        if (fieldOf(fields, 'kind') !== 'audit') continue;
        let entry: AuditEntry;
        try {
          entry = JSON.parse(fieldOf(fields, 'entry') ?? 'null') as AuditEntry;
        } catch {
          continue;
        }
        if (typeof entry !== 'object' || entry === null || !matches(entry, f)) continue;
        const writer = fieldOf(fields, 'writer');
        found.push(writer === undefined ? { ...entry, id } : { ...entry, id, writer });
        if (found.length >= f.limit) return found;
      }
      const last = page.at(-1);
      if (page.length < PAGE || last === undefined) return found;
      ceiling = `(${last[0]}`;
    }
    return found;
  }
}

function fieldOf(fields: readonly string[], name: string): string | undefined {
  for (let i = 0; i + 1 < fields.length; i += 2) if (fields[i] === name) return fields[i + 1];
  return undefined;
}
