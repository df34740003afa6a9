/** Why an audit entry was written; the union grows. */
export type AuditErrorCategory = 'out_of_scope' | 'forged_call';

/** One audited rejection. */
export interface AuditEntry {
  /** ISO-8601 time of the rejection. */
  readonly at: string;
  readonly callId: string;
  readonly tool: string;
  readonly errorCategory: AuditErrorCategory;
  /** The scope that was active when the caller last listed tools, if it listed any. */
  readonly scopeAtListing: string | null;
  /** The scope that was active when the call was dispatched. */
  readonly scopeAtDispatch: string;
  /** Who asked, when known (an agent id, a token subject). */
  readonly caller?: string;
  /** What was wrong, when the category alone does not say (e.g. why a call was judged forged). */
  readonly reason?: string;
}

/** Where audit entries go. `record` must not throw; if it does, the rejection still stands. */
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
