/**
 * The closed, growing catalogue of error codes. A code is part of the public
 * contract: it is never renamed or reused, only added. Each one is documented in
 * `docs/errors.md`; a unit test keeps the two in step.
 */
export const ErrorCode = {
  TOOL_NOT_FOUND: 'TOOL_NOT_FOUND',
  SCHEMA_VALIDATION: 'SCHEMA_VALIDATION',
  APPROVAL_DENIED: 'APPROVAL_DENIED',
  APPROVAL_PENDING: 'APPROVAL_PENDING',
  EXECUTION_FAILED: 'EXECUTION_FAILED',
  EXECUTION_TIMEOUT: 'EXECUTION_TIMEOUT',
  CANCELLED: 'CANCELLED',
  OUTPUT_VALIDATION: 'OUTPUT_VALIDATION',
  INVALID_TIER: 'INVALID_TIER',
  REGISTRY_ERROR: 'REGISTRY_ERROR',
  OUT_OF_SCOPE: 'OUT_OF_SCOPE',
  INVALID_DEFINITION: 'INVALID_DEFINITION',
  MALFORMED_TOOL_BLOCK: 'MALFORMED_TOOL_BLOCK',
  CONFIG_INVALID: 'CONFIG_INVALID',
  INTERNAL: 'INTERNAL',
  BAD_REQUEST: 'BAD_REQUEST',
  UNAUTHENTICATED: 'UNAUTHENTICATED',
  NO_WORKER: 'NO_WORKER',
  CALL_NOT_FOUND: 'CALL_NOT_FOUND',
  PAYLOAD_TOO_LARGE: 'PAYLOAD_TOO_LARGE',
  EXPIRED: 'EXPIRED',
  WORKER_LOST: 'WORKER_LOST',
  ROUTE_NOT_FOUND: 'ROUTE_NOT_FOUND',
  WAIT_TIMEOUT: 'WAIT_TIMEOUT',
  FORGED_CALL: 'FORGED_CALL',
  FORBIDDEN: 'FORBIDDEN',
  RESOURCE_LIMIT: 'RESOURCE_LIMIT',
  NOT_AWAITING_APPROVAL: 'NOT_AWAITING_APPROVAL',
  NOT_SPECULATABLE: 'NOT_SPECULATABLE',
  UNAVAILABLE: 'UNAVAILABLE',
} as const;
export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

/** Every code, in declaration order. */
export const ERROR_CODES: readonly ErrorCode[] = Object.freeze(Object.values(ErrorCode));

/** Narrows an unknown string to a known code (codes from a newer peer are not known). */
export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && (ERROR_CODES as readonly string[]).includes(value);
}

function assertNever(value: never): never {
  throw new Error(`unhandled error code: ${String(value)}`);
}

/**
 * Whether a failure of this kind may succeed when tried again. This says nothing
 * about whether it is *safe* to try again: that is the tool's own `retryable`
 * flag. A call is retried only when both agree.
 */
export function isRetryable(code: ErrorCode): boolean {
  switch (code) {
    case ErrorCode.EXECUTION_FAILED:
    case ErrorCode.EXECUTION_TIMEOUT:
    case ErrorCode.INTERNAL:
    case ErrorCode.NO_WORKER:
    case ErrorCode.WORKER_LOST:
    case ErrorCode.UNAVAILABLE:
      return true;
    case ErrorCode.TOOL_NOT_FOUND:
    case ErrorCode.SCHEMA_VALIDATION:
    case ErrorCode.APPROVAL_DENIED:
    case ErrorCode.APPROVAL_PENDING:
    case ErrorCode.CANCELLED:
    case ErrorCode.OUTPUT_VALIDATION:
    case ErrorCode.INVALID_TIER:
    case ErrorCode.REGISTRY_ERROR:
    case ErrorCode.OUT_OF_SCOPE:
    case ErrorCode.INVALID_DEFINITION:
    case ErrorCode.MALFORMED_TOOL_BLOCK:
    case ErrorCode.CONFIG_INVALID:
    case ErrorCode.BAD_REQUEST:
    case ErrorCode.UNAUTHENTICATED:
    case ErrorCode.CALL_NOT_FOUND:
    case ErrorCode.PAYLOAD_TOO_LARGE:
    case ErrorCode.EXPIRED:
    case ErrorCode.ROUTE_NOT_FOUND:
    case ErrorCode.FORGED_CALL:
    case ErrorCode.FORBIDDEN:
    case ErrorCode.RESOURCE_LIMIT:
    case ErrorCode.NOT_AWAITING_APPROVAL:
    case ErrorCode.NOT_SPECULATABLE:
      return false;
    case ErrorCode.WAIT_TIMEOUT:
      return true;
    default:
      return assertNever(code);
  }
}

/** The HTTP status a code maps to when it answers a request. */
export function httpStatusFor(code: ErrorCode): number {
  switch (code) {
    case ErrorCode.TOOL_NOT_FOUND:
    case ErrorCode.CALL_NOT_FOUND:
    case ErrorCode.ROUTE_NOT_FOUND:
      return 404;
    case ErrorCode.BAD_REQUEST:
      return 400;
    case ErrorCode.UNAUTHENTICATED:
      return 401;
    case ErrorCode.PAYLOAD_TOO_LARGE:
      return 413;
    case ErrorCode.NO_WORKER:
    case ErrorCode.UNAVAILABLE:
      return 503;
    case ErrorCode.EXPIRED:
      return 410;
    case ErrorCode.WAIT_TIMEOUT:
      return 408;
    case ErrorCode.SCHEMA_VALIDATION:
    case ErrorCode.NOT_SPECULATABLE:
      return 422;
    case ErrorCode.APPROVAL_DENIED:
    case ErrorCode.OUT_OF_SCOPE:
    case ErrorCode.FORBIDDEN:
      return 403;
    case ErrorCode.APPROVAL_PENDING:
      return 202;
    case ErrorCode.REGISTRY_ERROR:
    case ErrorCode.CANCELLED:
    case ErrorCode.NOT_AWAITING_APPROVAL:
      return 409;
    case ErrorCode.INVALID_TIER:
    case ErrorCode.INVALID_DEFINITION:
    case ErrorCode.MALFORMED_TOOL_BLOCK:
      return 400;
    case ErrorCode.EXECUTION_FAILED:
    case ErrorCode.OUTPUT_VALIDATION:
    case ErrorCode.WORKER_LOST:
    case ErrorCode.FORGED_CALL:
    case ErrorCode.RESOURCE_LIMIT:
      return 502;
    case ErrorCode.EXECUTION_TIMEOUT:
      return 504;
    case ErrorCode.CONFIG_INVALID:
    case ErrorCode.INTERNAL:
      return 500;
    default:
      return assertNever(code);
  }
}
