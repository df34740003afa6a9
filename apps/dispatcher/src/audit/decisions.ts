import { type AuditEntry, type AuditLogger, type AuditRejectionCategory, type ErrorCode, isFleetError } from '@forge-fleet/shared';
import type { Logger } from 'pino';
import type { Caller } from '../auth/authenticator.js';

/** Callers whose listing scope is remembered; the oldest is forgotten past this. */
const MAX_LISTINGS = 10_000;

/** The rejection category an error code is audited under (undefined: not a rejection we audit by category). */
export function rejectionCategory(code: ErrorCode): AuditRejectionCategory | undefined {
  switch (code) {
    case 'OUT_OF_SCOPE':
      return 'out_of_scope';
    case 'SCHEMA_VALIDATION':
      return 'schema';
    case 'APPROVAL_DENIED':
      return 'denied';
    case 'FORGED_CALL':
      return 'forged';
    case 'UNAUTHENTICATED':
      return 'unauthenticated';
    case 'FORBIDDEN':
      return 'forbidden';
    case 'TOOL_NOT_FOUND':
      return 'not_found';
    case 'NO_WORKER':
      return 'no_worker';
    case 'BAD_REQUEST':
    case 'PAYLOAD_TOO_LARGE':
      return 'bad_request';
    default:
      return undefined;
  }
}

/**
 * The dispatcher's side of the audit stream: one entry per decision, written
 * without making the request wait (one XADD on the auto-pipelined connection) —
 * except rejections, which are rare and awaited so that the entry exists before the
 * caller hears "no". A failing audit sink is logged and never changes a decision.
 *
 * It also remembers, per token subject, the scope the caller last listed tools
 * under (in this dispatcher process), which call entries carry as `scopeAtListing`.
 */
export class DecisionAudit {
  readonly #listings = new Map<string, string>();

  constructor(
    private readonly sink: AuditLogger,
    private readonly log: Logger,
  ) {}

  /** The caller listed tools under its current scope. */
  listed(caller: Caller, route: string): void {
    if (caller.subject !== undefined) {
      this.#listings.delete(caller.subject);
      this.#listings.set(caller.subject, caller.scope.name);
      if (this.#listings.size > MAX_LISTINGS) this.#listings.delete(this.#listings.keys().next().value!);
    }
    this.write({ ...this.#who(caller), decision: 'listed', route });
  }

  /** Caller fields of an entry: subject, role, scope at listing and now. */
  #who(caller: Caller): Omit<AuditEntry, 'at'> {
    const subject = caller.subject;
    if (subject === undefined) return { role: caller.role, scopeAtListing: null, scopeAtDispatch: caller.scope.name };
    return { caller: subject, role: caller.role, scopeAtListing: this.#listings.get(subject) ?? null, scopeAtDispatch: caller.scope.name };
  }

  /**
   * A decision about a call; `fields` adds the decision, tier… Not awaited: on the
   * hot path this is one object and one XADD queued on the auto-pipeline.
   */
  call(caller: Caller, callId: string, tool: string, fields: Omit<AuditEntry, 'at' | 'callId' | 'tool'>): void {
    const entry: AuditEntry = Object.assign(this.#who(caller), { at: new Date().toISOString(), callId, tool }, fields);
    void this.#record(entry);
  }

  /** A call refused before it was enqueued; resolves once written (or failed to). */
  async rejectedCall(caller: Caller, callId: string, tool: string, error: unknown, tier?: string): Promise<void> {
    const code = isFleetError(error) ? error.code : 'INTERNAL';
    const category = rejectionCategory(code);
    if (category === undefined) return;
    const reason = isFleetError(error) ? error.details['reason'] : undefined;
    await this.#record({
      at: new Date().toISOString(),
      ...this.#who(caller),
      callId,
      tool,
      ...(tier === undefined ? {} : { tier }),
      decision: 'rejected',
      category,
      code,
      // The first audit readers look for these.
      ...(category === 'out_of_scope' ? { errorCategory: 'out_of_scope' as const } : {}),
      ...(typeof reason === 'string' ? { reason } : {}),
    });
  }

  /** A request refused before any call existed (no or a bad token, a role that may not do this). */
  rejectedRequest(code: ErrorCode, route: string, reason: string, role?: string): void {
    const category = rejectionCategory(code);
    if (category === undefined) return;
    this.write({ decision: 'rejected', category, code, route, reason, ...(role === undefined ? {} : { role }) });
  }

  write(entry: Omit<AuditEntry, 'at'>): void {
    void this.#record({ at: new Date().toISOString(), ...entry });
  }

  async #record(entry: AuditEntry): Promise<void> {
    try {
      await this.sink.record(entry);
    } catch (err) {
      this.log.error({ err, decision: entry.decision, callId: entry.callId }, 'audit entry could not be written');
    }
  }
}
