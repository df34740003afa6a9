/**
 * Keys a JavaScript object cannot keep as data: assigning `__proto__` sets the
 * prototype instead, so zod's records (and any `obj[key] = value`) drop it
 * without a word. A configuration file's parser keeps it as an own key; the
 * loaders look for it first and refuse it with its place in the file.
 */
const LOST_KEYS: ReadonlySet<string> = new Set(['__proto__']);

/** The path of every key of `value` (nested objects and arrays included) that a parsed config object would lose. */
export function lostKeyPaths(value: unknown, path: readonly (string | number)[] = []): (string | number)[][] {
  if (typeof value !== 'object' || value === null) return [];
  const found: (string | number)[][] = [];
  if (Array.isArray(value)) {
    value.forEach((item, i) => found.push(...lostKeyPaths(item, [...path, i])));
    return found;
  }
  for (const key of Object.getOwnPropertyNames(value)) {
    if (LOST_KEYS.has(key)) found.push([...path, key]);
    else found.push(...lostKeyPaths((value as Record<string, unknown>)[key], [...path, key]));
  }
  return found;
}

/** What a loader says of such a key. */
export const LOST_KEY_PROBLEM = '`__proto__` cannot be a name here (a JavaScript object would drop it without a word): rename it';
