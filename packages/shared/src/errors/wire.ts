import { z } from 'zod';
import { ErrorCode, isErrorCode, isRetryable } from './codes.js';
import { RemoteFleetError } from './errors.js';
import { isFleetError, type FleetError } from './fleet-error.js';

/**
 * An error as it crosses a process boundary (queue, HTTP, reply channel).
 * `code` stays a plain string on the wire so that a peer on an older version
 * still decodes codes it does not know yet.
 */
export const WireError = z.object({
  code: z.string().min(1),
  message: z.string(),
  retryable: z.boolean(),
  details: z.record(z.string(), z.unknown()).default({}),
});
export type WireError = z.infer<typeof WireError>;

function describe(value: unknown): string {
  if (typeof value === 'string') return value;
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}

/**
 * Turns anything thrown into a {@link WireError}. FleetErrors keep their code,
 * message and details; anything else becomes `INTERNAL` with its message, so a
 * bug in a handler never loses the reason.
 */
export function toWireError(error: unknown): WireError {
  if (isFleetError(error)) {
    return { code: error.code, message: error.message, retryable: error.retryable, details: jsonSafe(error.details) };
  }
  if (error instanceof Error) {
    return { code: ErrorCode.INTERNAL, message: error.message || error.name, retryable: isRetryable(ErrorCode.INTERNAL), details: {} };
  }
  return {
    code: ErrorCode.INTERNAL,
    message: `a non-Error value was thrown: ${describe(error)}`,
    retryable: isRetryable(ErrorCode.INTERNAL),
    details: {},
  };
}

/** Rebuilds a typed error from its wire form. Unknown codes (from a newer peer) become `INTERNAL`. */
export function fromWireError(wire: WireError): FleetError {
  if (isErrorCode(wire.code)) return new RemoteFleetError(wire.code, wire.message, wire.details);
  return new RemoteFleetError(ErrorCode.INTERNAL, wire.message, { ...wire.details, originalCode: wire.code });
}

/** Details must survive JSON: drop what JSON cannot carry instead of failing the whole error. */
function jsonSafe(details: Readonly<Record<string, unknown>>): Record<string, unknown> {
  try {
    return JSON.parse(JSON.stringify(details)) as Record<string, unknown>;
  } catch {
    return {};
  }
}
