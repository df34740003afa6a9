import { BadRequestError } from '../errors/errors.js';

/**
 * What a call's arguments may hold, checked in one walk wherever arguments
 * enter — the dispatcher's routes, an approval's `modify`, and FleetClient
 * before it sends — so that the same arguments get the same refusal, naming
 * the same first problem, on every entrance.
 */

/**
 * Keys refused anywhere in arguments. Handlers (and the JavaScript they call)
 * routinely merge arguments into objects; with these keys a merge can reach
 * `Object.prototype`. Rejecting beats stripping: the caller learns its call was
 * not run as sent.
 */
export const FORBIDDEN_ARGUMENT_KEYS: ReadonlySet<string> = new Set(['__proto__', 'constructor', 'prototype']);

/**
 * The refusal of a number that is not finite at `path` (`a.b[0]`, or `arguments` for the whole).
 *
 * JSON's grammar has no bound on a number, but a 64-bit float does: `1e400`
 * parses as `Infinity`, which every JSON Schema check takes for a number, and
 * which `JSON.stringify` writes as `null` at the next hop, so a tool would run
 * with arguments other than those checked. JavaScript callers meet the same
 * loss from the other side (`NaN`, `Infinity` become `null` when sent).
 */
export function nonFiniteNumberError(path: string, value: number): BadRequestError {
  const where = path === '' ? 'arguments' : path;
  const why = Number.isNaN(value) ? 'NaN, which JSON has no way to write' : `${String(value)}: a number past ±1.7976931348623157e308, such as 1e400, parses as Infinity`;
  return new BadRequestError(`arguments hold a number JSON cannot carry at '${where}' (it is ${why}); send a finite number, or the value as a string`, { path: where });
}

interface Visit {
  readonly value: unknown;
  readonly path: string;
  /** The arguments object itself is depth 1. */
  readonly depth: number;
  /** The key this value sits under, when it sits in an object. */
  readonly key?: string;
}

/**
 * The first problem of `args` in document order — a forbidden key, a number JSON
 * cannot carry, or nesting deeper than `maxDepth` (FleetClient, which does not
 * know the dispatcher's limit, leaves it unbounded) — as the BAD_REQUEST to
 * answer, or undefined. A loop rather than recursion, stopping at the depth
 * limit: a hostile document costs no more than a legal one.
 */
export function argumentValueProblem(args: unknown, maxDepth = Number.POSITIVE_INFINITY): BadRequestError | undefined {
  const stack: Visit[] = [{ value: args, path: '', depth: 1 }];
  for (let item = stack.pop(); item !== undefined; item = stack.pop()) {
    // Own keys only, as JSON.parse made them (it defines `__proto__` as an own key).
    if (item.key !== undefined && FORBIDDEN_ARGUMENT_KEYS.has(item.key)) {
      return new BadRequestError(
        `arguments may not use the key '${item.key}' (at '${item.path}'): '__proto__', 'constructor' and 'prototype' are refused anywhere in arguments; rename the field`,
        { key: item.key },
      );
    }
    const v = item.value;
    if (typeof v === 'number' && !Number.isFinite(v)) return nonFiniteNumberError(item.path, v);
    if (typeof v !== 'object' || v === null) continue;
    if (item.depth > maxDepth) {
      return new BadRequestError(`arguments nest deeper than ${maxDepth} levels at '${item.path || 'arguments'}' (FORGE_MAX_JSON_DEPTH); flatten them`, { maxDepth });
    }
    const depth = item.depth + 1;
    // Pushed last to first, so that they are visited first to last.
    if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push({ value: v[i], path: `${item.path}[${i}]`, depth });
      continue;
    }
    const keys = Object.keys(v);
    for (let i = keys.length - 1; i >= 0; i--) {
      const key = keys[i]!;
      stack.push({ value: (v as Record<string, unknown>)[key], path: item.path === '' ? key : `${item.path}.${key}`, depth, key });
    }
  }
  return undefined;
}
