/**
 * What an audit entry records. `rejected` entries say why in `category`; the union grows.
 * - `listed`: the caller listed tools (its scope then becomes its `scopeAtListing`).
 * - `rejected`: the call (or request) was refused before it could run.
 * - `approved` / `modified`: admitted and enqueued, with the approval step's arguments (`modified`).
 * - `awaiting_approval`: admitted, waiting for a person.
 * - `completed` / `failed` / `cancelled`: how an admitted call ended.
 */
export type AuditDecision = 'listed' | 'rejected' | 'approved' | 'modified' | 'awaiting_approval' | 'completed' | 'failed' | 'cancelled';

/** Why a call or request was rejected; the union grows. */
export type AuditRejectionCategory = 'out_of_scope' | 'schema' | 'denied' | 'forged' | 'unauthenticated' | 'forbidden' | 'not_found' | 'no_worker' | 'bad_request';

/** The category of the first audit entries (rejections only), still written next to `category`; the union grows. */
export type AuditErrorCategory = 'out_of_scope' | 'forged_call';

/**
 * One audited decision. Entries written before `decision` existed are rejections
 * (`errorCategory` set, no `decision`); readers treat a missing `decision` as `rejected`.
 */
export interface AuditEntry {
  /** ISO-8601 time of the decision. */
  readonly at: string;
  /** What was decided. Absent only on entries from older writers (rejections). */
  readonly decision?: AuditDecision;
  /** Why a `rejected` entry was rejected. */
  readonly category?: AuditRejectionCategory;
  /** The error code the caller was answered with, for rejections and failures. */
  readonly code?: string;
  /** The call's id; absent for requests refused before a call existed (e.g. `unauthenticated`). */
  readonly callId?: string;
  readonly tool?: string;
  /** The first category field (`out_of_scope`, `forged_call`); kept for existing readers. */
  readonly errorCategory?: AuditErrorCategory;
  /** The scope that was active when the caller last listed tools, if it listed any. */
  readonly scopeAtListing?: string | null;
  /** The scope that was active when the call was dispatched (or the tools listed). */
  readonly scopeAtDispatch?: string;
  /** Who asked, when known (an agent id, a token subject). */
  readonly caller?: string;
  /** The authenticated caller's role. */
  readonly role?: string;
  /** The tool's tier, once the tool is known. */
  readonly tier?: string;
  /** The HTTP route, for requests refused before a call existed. */
  readonly route?: string;
  /** What was wrong, when the category alone does not say (e.g. why a call was judged forged). */
  readonly reason?: string;
  /** The person (token subject) who approved, modified or denied the call. */
  readonly decidedBy?: string;
  /** The arguments as submitted, on a person's decision. */
  readonly arguments?: Record<string, unknown>;
  /** The arguments a person changed them to (`modified`). */
  readonly editedArguments?: Record<string, unknown>;
}

/** Where audit entries go. `record` must not throw; if it does, the decision still stands. */
export interface AuditLogger {
  record(entry: AuditEntry): void | Promise<void>;
}

/** Keeps audit entries in memory; for tests and single-process agents. */
export class MemoryAuditLogger implements AuditLogger {
  readonly entries: AuditEntry[] = [];
  record(entry: AuditEntry): void {
    this.entries.push(entry);
  }
}
