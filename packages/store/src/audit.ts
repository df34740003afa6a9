import type { AuditDecision, AuditEntry, AuditLogger, AuditRejectionCategory, RiskSignal, RiskSignalQueue } from '@forge-fleet/shared';
import { type FleetKeys } from './keys.js';
import type { RedisConnection } from './redis.js';
import { batchScript, luaScript } from './scripts.js';
import { StepBatch } from './step-batch.js';

/** Entries kept in the stream (approximately: trimmed with `~`). */
export const AUDIT_MAX_ENTRIES = 10_000;

/** One audit stream entry; see {@link RedisAuditLogger}. */
const APPEND_ENTRY = `redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', 'kind', ARGV[2], 'entry', ARGV[3])
return 1`;

/**
 * Audit entries as a capped Redis stream, readable by any tool that speaks
 * Redis (`XRANGE <prefix>:{<prefix>.audit} - +`) and by {@link AuditReader}.
 * Every call leaves an entry on the dispatcher and one on the worker, so the
 * entries of one event-loop turn are appended by one script run (one XADD per
 * entry inside it, in order) rather than one command each. The stream is one
 * key, so this holds on a Redis Cluster too.
 */
export class RedisAuditLogger implements AuditLogger {
  readonly #append: StepBatch<string | null>;

  constructor(
    private readonly redis: RedisConnection,
    private readonly keys: FleetKeys,
  ) {
    this.#append = new StepBatch(
      (keys, args) => redis.xadd(keys[0]!, 'MAXLEN', '~', args[0]!, '*', 'kind', args[1]!, 'entry', args[2]!),
      luaScript<unknown[]>(redis, 'forgeAppendAudit', 'variable', batchScript(APPEND_ENTRY)),
    );
  }

  async record(entry: AuditEntry): Promise<void> {
    await this.#append.run([this.keys.audit], [AUDIT_MAX_ENTRIES, 'audit', JSON.stringify(entry)]);
  }
}

/** Risk signals go to the same stream as audit entries, marked as such; writing never blocks the call path. */
export class RedisRiskSignalQueue implements RiskSignalQueue {
  constructor(
    private readonly redis: RedisConnection,
    private readonly keys: FleetKeys,
    private readonly onError: (error: unknown) => void = () => {},
  ) {}

  push(signal: RiskSignal): void {
    this.redis.xadd(this.keys.audit, 'MAXLEN', '~', AUDIT_MAX_ENTRIES, '*', 'kind', 'risk', 'entry', JSON.stringify(signal)).catch(this.onError);
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
export type StoredAuditEntry = AuditEntry & { readonly id: string };

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
  constructor(
    private readonly redis: RedisConnection,
    private readonly keys: FleetKeys,
  ) {}

  async query(f: AuditFilter): Promise<StoredAuditEntry[]> {
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
        found.push({ ...entry, id });
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
