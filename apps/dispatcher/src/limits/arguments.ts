import { BadRequestError, nonFiniteNumberError, PayloadTooLargeError } from '@forge-fleet/shared';

/** What a call's arguments may be. */
export interface ArgumentLimits {
  /** Most bytes of the arguments as JSON. @defaultValue 262144 (FORGE_MAX_ARGUMENT_BYTES) */
  readonly maxBytes: number;
  /** Deepest nesting of objects and arrays; the arguments object itself is depth 1. @defaultValue 32 (FORGE_MAX_JSON_DEPTH) */
  readonly maxDepth: number;
}

export const DEFAULT_ARGUMENT_LIMITS: ArgumentLimits = Object.freeze({ maxBytes: 256 * 1024, maxDepth: 32 });

/**
 * Keys refused anywhere in arguments. Handlers (and the JavaScript they call)
 * routinely merge arguments into objects; with these keys a merge can reach
 * `Object.prototype`. Rejecting beats stripping: the caller learns its call was
 * not run as sent.
 */
export const FORBIDDEN_KEYS: ReadonlySet<string> = new Set(['__proto__', 'constructor', 'prototype']);

/** Arguments over the size limit: 413 PAYLOAD_TOO_LARGE, with a message about the arguments rather than the body. */
export class ArgumentsTooLargeError extends PayloadTooLargeError {
  constructor(limitBytes: number, sizeBytes: number) {
    super(limitBytes);
    this.message = `the call's arguments are ${sizeBytes} bytes of JSON, more than the limit of ${limitBytes} (FORGE_MAX_ARGUMENT_BYTES); send smaller arguments (pass large data by reference, e.g. a URL)`;
  }
}

/**
 * Checks a call's arguments against the limits, nesting and keys first (a walk that
 * stops at the depth limit, so a hostile document costs no more than a legal one).
 * @throws BadRequestError for nesting deeper than `maxDepth`, a forbidden key or a number JSON cannot carry (1e400 parses
 *   as Infinity); ArgumentsTooLargeError over `maxBytes`.
 */
export function checkArguments(args: Readonly<Record<string, unknown>>, limits: ArgumentLimits): void {
  walk(args, 1, '', limits.maxDepth);
  const size = Buffer.byteLength(JSON.stringify(args));
  if (size > limits.maxBytes) throw new ArgumentsTooLargeError(limits.maxBytes, size);
}

function walk(value: unknown, depth: number, path: string, maxDepth: number): void {
  if (typeof value === 'number' && !Number.isFinite(value)) throw nonFiniteNumberError(path, value);
  if (typeof value !== 'object' || value === null) return;
  if (depth > maxDepth) {
    throw new BadRequestError(`arguments nest deeper than ${maxDepth} levels at '${path || 'arguments'}' (FORGE_MAX_JSON_DEPTH); flatten them`, { maxDepth });
  }
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) walk(value[i], depth + 1, `${path}[${i}]`, maxDepth);
    return;
  }
  // Own keys only, as JSON.parse made them (it defines `__proto__` as an own key).
  for (const key of Object.keys(value)) {
    if (FORBIDDEN_KEYS.has(key)) {
      throw new BadRequestError(`arguments may not use the key '${key}' (at '${path ? `${path}.` : ''}${key}'): '__proto__', 'constructor' and 'prototype' are refused anywhere in arguments; rename the field`, { key });
    }
    walk((value as Record<string, unknown>)[key], depth + 1, path ? `${path}.${key}` : key, maxDepth);
  }
}
