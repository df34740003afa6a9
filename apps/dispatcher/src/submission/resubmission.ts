import { type IdempotencyConflictKind, stableStringify, type ToolCall } from '@forge-fleet/shared';
import type { CallRecord } from '@forge-fleet/store';
import type { Caller } from '../auth/authenticator.js';

/**
 * Whether the caller may see and cancel a call: its submitter, or an admin.
 * Calls submitted anonymously (dev mode) are anyone's. Others' calls are
 * answered as not found, so ids reveal nothing.
 */
export function ownedBy(record: CallRecord, caller: Caller): boolean {
  const owner = record.envelope?.caller;
  return owner === undefined || caller.role === 'admin' || owner === caller.subject;
}

/**
 * How a resubmission differs from the call recorded under its id: `tool`,
 * `arguments`, or `undefined` when it is the same call. `request` is the
 * resubmission's request hash (see requestHash); records written before the
 * hash was kept are compared by their envelope's call.
 */
export function conflictOf(existing: CallRecord, call: ToolCall, request: string): IdempotencyConflictKind | undefined {
  if (existing.name !== call.name) return 'tool';
  if (existing.request !== undefined) return existing.request === request ? undefined : 'arguments';
  const recorded = existing.envelope?.call.arguments;
  return recorded === undefined || stableStringify(recorded) === stableStringify(call.arguments) ? undefined : 'arguments';
}
