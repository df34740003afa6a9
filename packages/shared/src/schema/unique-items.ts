import type { ErrorObject, FuncKeywordDefinition } from 'ajv';
import { stableStringify } from '../wire/stable-json.js';

/**
 * The key two items share exactly when JSON Schema calls them equal: objects
 * with the same members in any order, arrays with equal items in order,
 * numbers by value (`0` and `-0` alike), and nothing equal across types
 * (`1` is not `"1"`). Objects and arrays are written by stableStringify,
 * which sorts keys at every depth, so an object's member order never counts;
 * a type letter in front of each key keeps types apart.
 */
function itemKey(value: unknown): string {
  switch (typeof value) {
    case 'string':
      return `s${value}`;
    case 'number':
      return `n${value === 0 ? 0 : value}`;
    case 'boolean':
      return value ? 't' : 'f';
    default:
      // `null`, arrays and objects. A string inside is JSON-quoted, so no content of one can close the structure around it.
      return `j${stableStringify(value)}`;
  }
}

/**
 * `uniqueItems` in one pass over the array. ajv's own compares every pair
 * of items unless the schema types them as scalars: a 229 KB argument of
 * 20,000 small objects held the dispatcher's event loop for 5 s, and every
 * other call with it. Here each item is written once as a canonical key, so
 * the time is linear in the array's size (plus a sort of each object's keys).
 *
 * The answer is ajv's to the letter, the same pair of indices in the same
 * message: the last item that equals an earlier one, with the nearest such
 * earlier one. Nesting too deep for the key's recursion overflows the stack,
 * which the compiled validator already answers as an issue (compile.ts).
 */
export const uniqueItemsKeyword: FuncKeywordDefinition = {
  keyword: 'uniqueItems',
  type: 'array',
  schemaType: 'boolean',
  errors: true,
  validate: function uniqueItems(this: unknown, unique: boolean, data: readonly unknown[]): boolean {
    const self = uniqueItems as typeof uniqueItems & { errors?: Partial<ErrorObject>[] | null };
    self.errors = null;
    if (!unique || data.length < 2) return true;
    const lastAt = new Map<string, number>();
    let found: { i: number; j: number } | undefined;
    for (let i = 0; i < data.length; i++) {
      const key = itemKey(data[i]);
      const j = lastAt.get(key);
      if (j !== undefined) found = { i, j };
      lastAt.set(key, i);
    }
    if (found === undefined) return true;
    self.errors = [{ keyword: 'uniqueItems', params: found, message: `must NOT have duplicate items (items ## ${found.j} and ${found.i} are identical)` }];
    return false;
  },
};
