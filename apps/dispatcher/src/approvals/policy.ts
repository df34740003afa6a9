import { type ApprovalHandler, AutoApprove, type Authorization, DenyAll, TierBasedApproval, UnauthenticatedError } from '@forge-fleet/shared';
import { timingSafeEqual } from 'node:crypto';

/** The approval handler a dispatcher runs for every call. */
export function approvalPolicy(kind: 'tier' | 'auto' | 'deny'): ApprovalHandler {
  switch (kind) {
    case 'tier':
      return new TierBasedApproval();
    case 'auto':
      return new AutoApprove();
    case 'deny':
      return new DenyAll('the dispatcher is configured to deny every call (FORGE_APPROVAL=deny)');
  }
}

/**
 * Maps `Authorization: Bearer <key>` to the grants configured for that key.
 * No header means an anonymous caller (no grants); an unknown key is refused.
 */
export class ApiKeys {
  readonly #keys: ReadonlyArray<readonly [Buffer, Authorization]>;

  constructor(keys: Readonly<Record<string, Authorization>>) {
    this.#keys = Object.entries(keys).map(([key, auth]) => [Buffer.from(key), Object.freeze({ ...auth, tools: [...auth.tools] })] as const);
  }

  /** @throws UnauthenticatedError for a malformed header or an unknown key. */
  authenticate(header: string | undefined): Authorization | undefined {
    if (header === undefined || header === '') return undefined;
    const match = /^Bearer\s+(\S+)$/i.exec(header);
    if (match === null) throw new UnauthenticatedError('the Authorization header must be "Bearer <API key>"');
    const presented = Buffer.from(match[1] ?? '');
    // Constant-time comparison: response timing must not reveal how much of a key matched.
    for (const [key, auth] of this.#keys) {
      if (key.length === presented.length && timingSafeEqual(key, presented)) return auth;
    }
    throw new UnauthenticatedError('unknown API key');
  }
}
