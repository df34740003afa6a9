import type { z } from 'zod';

/**
 * Every field name a configuration schema knows, at any depth: what an
 * unknown key is compared with, so that `instance` gets "did you mean
 * `instances`?". Read from the schema itself, so it cannot drift from it.
 */
export function fieldNamesOf(schema: z.ZodType): ReadonlySet<string> {
  const names = new Set<string>();
  const seen = new Set<unknown>();
  const stack: unknown[] = [schema];
  while (stack.length > 0) {
    const node = stack.pop() as { _zod?: { def?: Record<string, unknown> } } | undefined;
    if (node === undefined || seen.has(node)) continue;
    seen.add(node);
    const def = node._zod?.def;
    if (def === undefined) continue;
    if (def.type === 'object') {
      for (const [name, child] of Object.entries(def.shape as Record<string, unknown>)) {
        names.add(name);
        stack.push(child);
      }
    }
    for (const key of ['innerType', 'in', 'out', 'valueType', 'element', 'left', 'right']) if (def[key] !== undefined) stack.push(def[key]);
    if (Array.isArray(def.options)) stack.push(...(def.options as unknown[]));
  }
  return names;
}

/**
 * What to do about a schema's issue, said after the validator's own words
 * (`; did you mean "instances"?`, `; write 1`, `; add it`), or '' when its
 * words already say it.
 */
export function issueFix(issue: z.core.$ZodIssue, fields: ReadonlySet<string>): string {
  switch (issue.code) {
    case 'unrecognized_keys':
      return `; ${issue.keys.map((key) => fixOfKey(key, fields)).join('; ')}`;
    case 'invalid_value':
      return `; write ${issue.values.length === 1 ? JSON.stringify(issue.values[0]) : `one of ${issue.values.map((v) => JSON.stringify(v)).join(', ')}`}`;
    case 'invalid_type':
      return / received undefined$/.test(issue.message) ? '; add it' : '';
    default:
      return '';
  }
}

function fixOfKey(key: string, fields: ReadonlySet<string>): string {
  let best: string | undefined;
  let bestDistance = Number.POSITIVE_INFINITY;
  for (const field of fields) {
    const d = field.toLowerCase() === key.toLowerCase() ? 0 : distance(key, field, 3);
    if (d < bestDistance) [best, bestDistance] = [field, d];
  }
  // Within two edits (or a third on a long name): a slip of the keyboard, not another word.
  const near = best !== undefined && (bestDistance <= 2 || (bestDistance === 3 && key.length >= 10));
  return near ? `did you mean ${JSON.stringify(best)}?` : `remove ${JSON.stringify(key)}: it is not a field here`;
}

/** Levenshtein distance of `a` and `b`, or `cap + 1` once it is past `cap`. */
function distance(a: string, b: string, cap: number): number {
  if (Math.abs(a.length - b.length) > cap) return cap + 1;
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    let smallest = i;
    for (let j = 1; j <= b.length; j++) {
      const value = Math.min((previous[j] ?? 0) + 1, (row[j - 1] ?? 0) + 1, (previous[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1));
      row.push(value);
      smallest = Math.min(smallest, value);
    }
    if (smallest > cap) return cap + 1;
    previous = row;
  }
  return previous[b.length] ?? cap + 1;
}
