import { type ErrorCode, httpStatusFor, isRetryable } from './codes.js';

/**
 * Recognises a FleetError across copies of this package and after a round trip
 * through `structuredClone`-free boundaries: `instanceof` alone breaks as soon as
 * two versions of the package are installed side by side.
 */
const BRAND: unique symbol = Symbol.for('forge-fleet.FleetError');

/** Extra, machine-readable facts about a failure. Always JSON-serialisable. */
export type ErrorDetails = Readonly<Record<string, unknown>>;

/**
 * The one base class of every error Forge Fleet raises on purpose. Each subclass
 * fixes a stable {@link ErrorCode}; its message says what failed and what to do.
 */
export abstract class FleetError extends Error {
  abstract readonly code: ErrorCode;
  readonly [BRAND] = true as const;
  /** Machine-readable facts (tool name, path, reason…), safe to send to clients. */
  readonly details: ErrorDetails;

  protected constructor(message: string, details: ErrorDetails = {}, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.details = Object.freeze({ ...details });
  }

  /** Whether this kind of failure may succeed when tried again (see {@link isRetryable}). */
  get retryable(): boolean {
    return isRetryable(this.code);
  }

  /** The HTTP status this error answers with. */
  get httpStatus(): number {
    return httpStatusFor(this.code);
  }

  toJSON(): { code: ErrorCode; message: string; details: ErrorDetails } {
    return { code: this.code, message: this.message, details: this.details };
  }
}

/** True for any FleetError, whichever copy of this package created it. */
export function isFleetError(value: unknown): value is FleetError {
  return typeof value === 'object' && value !== null && (value as { [BRAND]?: unknown })[BRAND] === true;
}
