import { type ApprovalHandler, AutoApprove, DenyAll, TierBasedApproval } from '@forge-fleet/shared';

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
