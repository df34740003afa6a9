import { BadRequestError } from '../errors/errors.js';

/**
 * Numbers JSON cannot carry. JSON's grammar has no bound on a number, but a
 * 64-bit float does: `1e400` parses as `Infinity`, which every JSON Schema
 * check takes for a number, and which `JSON.stringify` writes as `null` at
 * the next hop, so a tool would run with arguments other than those checked.
 * JavaScript callers meet the same loss from the other side (`NaN`,
 * `Infinity` become `null` when sent). Both are refused, with one message,
 * wherever arguments enter.
 */

/** The refusal of a number that is not finite at `path` (`a.b[0]`, or `arguments` for the whole). */
export function nonFiniteNumberError(path: string, value: number): BadRequestError {
  const where = path === '' ? 'arguments' : path;
  const why = Number.isNaN(value) ? 'NaN, which JSON has no way to write' : `${String(value)}: a number past ±1.7976931348623157e308, such as 1e400, parses as Infinity`;
  return new BadRequestError(`arguments hold a number JSON cannot carry at '${where}' (it is ${why}); send a finite number, or the value as a string`, { path: where });
}

/** The first number of `value` that is not finite, with its path, or undefined. A loop: values may nest deep. */
export function findNonFiniteNumber(value: unknown): { path: string; value: number } | undefined {
  const stack: { value: unknown; path: string }[] = [{ value, path: '' }];
  for (let item = stack.pop(); item !== undefined; item = stack.pop()) {
    const v = item.value;
    if (typeof v === 'number') {
      if (!Number.isFinite(v)) return { path: item.path, value: v };
      continue;
    }
    if (typeof v !== 'object' || v === null) continue;
    if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push({ value: v[i], path: `${item.path}[${i}]` });
      continue;
    }
    for (const key of Object.keys(v).reverse()) stack.push({ value: (v as Record<string, unknown>)[key], path: item.path === '' ? key : `${item.path}.${key}` });
  }
  return undefined;
}
