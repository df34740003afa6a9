import { pointerSegment } from '../wire/json-pointer.js';

/**
 * The bound on how much schema one tool may ask the validator to compile.
 *
 * ajv turns a schema into code once, on the event loop of whichever process
 * reads the definition (the worker importing an MCP server's list, every
 * dispatcher reading the catalog). That costs about a third of a millisecond
 * per subschema, and more than linearly with nesting: a 24 KB schema of 400
 * nested `properties` took seconds, 1,000 flat properties about 0.4 s. An MCP
 * server's list is untrusted, so a schema the fleet compiles is bounded in
 * both ways, by counting, before ajv sees it: the answer depends on the
 * schema alone, the same in every process.
 */

/** Most subschemas (schema objects, the root included) one schema may hold. */
export const MAX_SUBSCHEMAS = 2000;
/** Most levels of subschemas one schema may nest (the root is level 1). */
export const MAX_SCHEMA_DEPTH = 48;

/** Keywords whose value maps names to subschemas (`dependencies` also holds arrays of names, draft-07). */
const SCHEMA_MAPS: ReadonlySet<string> = new Set(['properties', 'patternProperties', '$defs', 'definitions', 'dependentSchemas', 'dependencies']);
/** Keywords whose value is data (or annotation), never compiled as a schema. */
const DATA_KEYWORDS: ReadonlySet<string> = new Set(['enum', 'const', 'default', 'examples', 'example', '$vocabulary']);

/** Where a schema passes a bound, and which. */
export interface SchemaSizeExcess {
  /** JSON Pointer, from the schema's root, of the subschema nested too deep; `''` (the whole schema) when it holds too many. */
  readonly path: string;
  readonly reason: string;
}

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/** What {@link measureSchema} found: how many subschemas it counted, and where the schema passed a bound, if it did. */
export interface SchemaMeasure {
  /** Subschemas counted, the root included; the walk stops at the first excess, so then a lower bound. */
  readonly subschemas: number;
  readonly excess: SchemaSizeExcess | undefined;
}

/**
 * Counts `schema`'s subschemas and levels, stopping at the first place it
 * passes {@link MAX_SUBSCHEMAS} or {@link MAX_SCHEMA_DEPTH}. Subschemas are the objects under schema keywords
 * (`properties`' members, `items`, `anyOf`'s entries, an unknown keyword's
 * object too: counting more is the safe side); `enum`, `const`, `default`,
 * `examples` and `x-*` annotations are data and not counted. Walked with a
 * stack of its own, so any depth is measured, not overflowed.
 */
export function measureSchema(schema: unknown): SchemaMeasure {
  if (!isObject(schema)) return { subschemas: 0, excess: undefined };
  const stack: { node: Record<string, unknown>; path: string; depth: number }[] = [{ node: schema, path: '', depth: 1 }];
  let count = 0;
  while (stack.length > 0) {
    const { node, path, depth } = stack.pop() as (typeof stack)[number];
    count += 1;
    if (depth > MAX_SCHEMA_DEPTH) {
      const reason = `the schema nests subschemas more than ${MAX_SCHEMA_DEPTH} levels deep, which the validator cannot compile in bounded time; flatten it, or describe recursion with a $ref to a definition in $defs`;
      return { subschemas: count, excess: { path, reason } };
    }
    if (count > MAX_SUBSCHEMAS) {
      const reason = `the schema holds more than ${MAX_SUBSCHEMAS} subschemas, which the validator cannot compile in bounded time; split the tool, or share repeated parts with a $ref to one definition in $defs`;
      // The schema as a whole is too large: no one subschema is to blame.
      return { subschemas: count, excess: { path: '', reason } };
    }
    for (const key of Object.keys(node)) {
      if (DATA_KEYWORDS.has(key) || key.startsWith('x-')) continue;
      const value = node[key];
      const at = `${path}/${pointerSegment(key)}`;
      if (SCHEMA_MAPS.has(key) && isObject(value)) {
        for (const name of Object.keys(value)) {
          const member = value[name];
          if (isObject(member)) stack.push({ node: member, path: `${at}/${pointerSegment(name)}`, depth: depth + 1 });
        }
      } else if (Array.isArray(value)) {
        value.forEach((item, i) => {
          if (isObject(item)) stack.push({ node: item, path: `${at}/${i}`, depth: depth + 1 });
        });
      } else if (isObject(value)) {
        stack.push({ node: value, path: at, depth: depth + 1 });
      }
    }
  }
  return { subschemas: count, excess: undefined };
}

/** The first place `schema` passes {@link MAX_SUBSCHEMAS} or {@link MAX_SCHEMA_DEPTH} (see {@link measureSchema}), or undefined within both. */
export function schemaSizeExcess(schema: unknown): SchemaSizeExcess | undefined {
  return measureSchema(schema).excess;
}
