import { ErrorCode, type FleetError, fromWireError, type ToolResult } from '@forge-fleet/shared';

/**
 * Codes a call ends with, after it was admitted, without its tool having run:
 * a person denied it, its approval or queue deadline passed (`EXPIRED`: "it
 * was never executed"), it was cancelled, or a worker refused it as forged.
 * `NO_WORKER` belongs here unless `details.runs` says the call had run before
 * its last worker went (see {@link refusalOf}). `CANCELLED` is here whether or
 * not the handler had begun — the answer does not say — because a cancel is a
 * decision that no result is wanted, as an aborted `signal` rejects too.
 */
const NEVER_RAN: ReadonlySet<string> = new Set([ErrorCode.APPROVAL_DENIED, ErrorCode.EXPIRED, ErrorCode.CANCELLED, ErrorCode.FORGED_CALL]);

/**
 * The FleetError `call` and `wait` throw for a call that ended without its
 * tool running, or `undefined` when the result is the tool's own — it
 * completed, or it ran and failed (`EXECUTION_FAILED`, `EXECUTION_TIMEOUT`,
 * `WORKER_LOST`, `RESOURCE_LIMIT`…), which stays a result with `isError`.
 * So a refusal throws with its code whether the dispatcher answered it at
 * submission or the call ended that way later (after waiting for a person):
 * the HTTP answers differ, the agent's code need not.
 */
export function refusalOf(result: ToolResult): FleetError | undefined {
  const error = result.error;
  if (!result.isError || error === undefined) return undefined;
  const ran = error.code === ErrorCode.NO_WORKER ? typeof error.details['runs'] === 'number' && error.details['runs'] > 0 : !NEVER_RAN.has(error.code);
  return ran ? undefined : fromWireError(error);
}
