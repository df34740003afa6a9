import { argumentValueProblem, PayloadTooLargeError } from '@forge-fleet/shared';

/** What a call's arguments may be. */
export interface ArgumentLimits {
  /** Most bytes of the arguments as JSON. @defaultValue 262144 (FORGE_MAX_ARGUMENT_BYTES) */
  readonly maxBytes: number;
  /** Deepest nesting of objects and arrays; the arguments object itself is depth 1. @defaultValue 32 (FORGE_MAX_JSON_DEPTH) */
  readonly maxDepth: number;
}

export const DEFAULT_ARGUMENT_LIMITS: ArgumentLimits = Object.freeze({ maxBytes: 256 * 1024, maxDepth: 32 });

/** Arguments over the size limit: 413 PAYLOAD_TOO_LARGE, with a message about the arguments rather than the body. */
export class ArgumentsTooLargeError extends PayloadTooLargeError {
  constructor(limitBytes: number, sizeBytes: number) {
    super(limitBytes);
    this.message = `the call's arguments are ${sizeBytes} bytes of JSON, more than the limit of ${limitBytes} (FORGE_MAX_ARGUMENT_BYTES); send smaller arguments (pass large data by reference, e.g. a URL)`;
  }
}

/**
 * Checks a call's arguments against the limits: keys, numbers and nesting first, in the walk FleetClient
 * also makes (shared `argumentValueProblem`, which stops at the depth limit, so a hostile document costs no
 * more than a legal one), then the size.
 * @throws BadRequestError for nesting deeper than `maxDepth`, a forbidden key or a number JSON cannot carry (1e400 parses
 *   as Infinity); ArgumentsTooLargeError over `maxBytes`.
 */
export function checkArguments(args: Readonly<Record<string, unknown>>, limits: ArgumentLimits): void {
  const problem = argumentValueProblem(args, limits.maxDepth);
  if (problem !== undefined) throw problem;
  const size = Buffer.byteLength(JSON.stringify(args));
  if (size > limits.maxBytes) throw new ArgumentsTooLargeError(limits.maxBytes, size);
}
