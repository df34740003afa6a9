/** The facts of one error code: every consumer reads them from {@link ERROR_TABLE}, none restates them. */
export interface ErrorCodeFacts {
  /** The HTTP status an answer carrying this code has. */
  readonly status: number;
  /**
   * Whether a failure of this kind may succeed when tried again. This says
   * nothing about whether it is *safe* to try again: that is the tool's own
   * `retryable` flag. A call is retried only when both agree.
   */
  readonly retryable: boolean;
}

/**
 * The closed, growing catalogue of error codes, one row per code: this is the
 * only place a code is declared. A code is part of the public contract: it is
 * never renamed or reused, only added (append new rows at the end, so
 * {@link ERROR_CODES} keeps its order). Each one is documented in
 * `docs/errors.md`; a unit test keeps the two in step.
 */
export const ERROR_TABLE = freezeRows({
  TOOL_NOT_FOUND: { status: 404, retryable: false },
  SCHEMA_VALIDATION: { status: 422, retryable: false },
  APPROVAL_DENIED: { status: 403, retryable: false },
  APPROVAL_PENDING: { status: 202, retryable: false },
  EXECUTION_FAILED: { status: 502, retryable: true },
  EXECUTION_TIMEOUT: { status: 504, retryable: true },
  CANCELLED: { status: 409, retryable: false },
  OUTPUT_VALIDATION: { status: 502, retryable: false },
  INVALID_TIER: { status: 400, retryable: false },
  REGISTRY_ERROR: { status: 409, retryable: false },
  OUT_OF_SCOPE: { status: 403, retryable: false },
  INVALID_DEFINITION: { status: 400, retryable: false },
  MALFORMED_TOOL_BLOCK: { status: 400, retryable: false },
  CONFIG_INVALID: { status: 500, retryable: false },
  INTERNAL: { status: 500, retryable: true },
  BAD_REQUEST: { status: 400, retryable: false },
  UNAUTHENTICATED: { status: 401, retryable: false },
  NO_WORKER: { status: 503, retryable: true },
  CALL_NOT_FOUND: { status: 404, retryable: false },
  PAYLOAD_TOO_LARGE: { status: 413, retryable: false },
  EXPIRED: { status: 410, retryable: false },
  WORKER_LOST: { status: 502, retryable: true },
  // The MCP server process running a call died under it: like WORKER_LOST, whether it took effect is unknown.
  MCP_SERVER_LOST: { status: 502, retryable: true },
  ROUTE_NOT_FOUND: { status: 404, retryable: false },
  // The caller stopped waiting; the call goes on, so waiting again may well see it end.
  WAIT_TIMEOUT: { status: 408, retryable: true },
  FORGED_CALL: { status: 502, retryable: false },
  FORBIDDEN: { status: 403, retryable: false },
  RESOURCE_LIMIT: { status: 502, retryable: false },
  NOT_AWAITING_APPROVAL: { status: 409, retryable: false },
  NOT_SPECULATABLE: { status: 422, retryable: false },
  UNAVAILABLE: { status: 503, retryable: true },
  // Sending the same conflicting submission again meets the same recorded call.
  IDEMPOTENCY_CONFLICT: { status: 409, retryable: false },
  // The HTTP doors (docs/http-api.md "Connections and requests"): refused before any body is read.
  HOST_NOT_ALLOWED: { status: 421, retryable: false },
  ORIGIN_NOT_ALLOWED: { status: 403, retryable: false },
  URI_TOO_LONG: { status: 414, retryable: false },
  HEADERS_TOO_LARGE: { status: 431, retryable: false },
  UNSUPPORTED_MEDIA_TYPE: { status: 415, retryable: false },
  // A body that arrives too slowly; on a better connection the same request may well get through.
  REQUEST_TIMEOUT: { status: 408, retryable: true },
} as const satisfies Record<string, ErrorCodeFacts>);

/** A stable error code: a key of {@link ERROR_TABLE}. */
export type ErrorCode = keyof typeof ERROR_TABLE;

/** Every code by name (`ErrorCode.TOOL_NOT_FOUND === 'TOOL_NOT_FOUND'`), derived from {@link ERROR_TABLE}. */
export const ErrorCode = Object.freeze(Object.fromEntries(Object.keys(ERROR_TABLE).map((code) => [code, code]))) as {
  readonly [C in ErrorCode]: C;
};

/** Every code, in declaration order. */
export const ERROR_CODES: readonly ErrorCode[] = Object.freeze(Object.keys(ERROR_TABLE) as ErrorCode[]);

/** Narrows an unknown string to a known code (codes from a newer peer are not known). */
export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && Object.hasOwn(ERROR_TABLE, value);
}

/** The row of a code; a value that is no code (a cast gone wrong) fails loudly rather than reading as "not retryable". */
function factsOf(code: ErrorCode): ErrorCodeFacts {
  if (!isErrorCode(code)) throw new Error(`unknown error code: ${String(code)}`);
  return ERROR_TABLE[code];
}

/** Whether a failure of this kind may succeed when tried again (see {@link ErrorCodeFacts.retryable}). */
export function isRetryable(code: ErrorCode): boolean {
  return factsOf(code).retryable;
}

/** The HTTP status a code maps to when it answers a request. */
export function httpStatusFor(code: ErrorCode): number {
  return factsOf(code).status;
}

/** Freezes the table and each of its rows: a code's facts cannot be changed at run time. */
function freezeRows<const T extends Readonly<Record<string, ErrorCodeFacts>>>(rows: T): T {
  for (const row of Object.values(rows)) Object.freeze(row);
  return Object.freeze(rows);
}
