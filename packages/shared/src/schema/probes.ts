import { pointerSegment } from '../wire/json-pointer.js';
import { isJsonObject, type JsonSchema } from './json-schema.js';

/** How deep {@link probeValues} follows `properties` and `items` when it shapes a value after the schema. */
const SHAPE_DEPTH = 4;

/** A value of a JSON type, for a schema that names one. */
function sampleOfType(type: unknown): unknown {
  switch (type) {
    case 'null':
      return null;
    case 'boolean':
      return true;
    case 'integer':
      return 0;
    case 'number':
      return 1.5;
    case 'string':
      return '';
    case 'array':
      return [];
    default:
      return {};
  }
}

/**
 * A value shaped after `schema`: every declared property present, every
 * prefix item and `items` entry filled, so a trial validation reaches the
 * subschemas a real call would.
 */
function shaped(schema: unknown, depth: number): unknown {
  if (!isJsonObject(schema) || depth === 0) return {};
  const type: unknown = Array.isArray(schema.type) ? (schema.type as unknown[])[0] : schema.type;
  if (isJsonObject(schema.properties)) {
    return Object.fromEntries(Object.entries(schema.properties).map(([name, sub]) => [name, shaped(sub, depth - 1)]));
  }
  if (Array.isArray(schema.prefixItems)) return schema.prefixItems.map((sub) => shaped(sub, depth - 1));
  if (Array.isArray(schema.items)) return schema.items.map((sub) => shaped(sub, depth - 1));
  if (isJsonObject(schema.items)) return [shaped(schema.items, depth - 1)];
  return sampleOfType(type);
}

/**
 * The values a freshly compiled schema is tried on before it is accepted: one
 * of each JSON type, a value shaped after the schema's own properties and
 * items, and the schema's `default` and `examples`. The answers do not
 * matter; a validator that overflows its stack on any of them recurses
 * without bound whatever a call sends (ajv's `$dynamicRef` resolution can
 * loop), and is refused at definition rather than failing every call.
 */
export function probeValues(schema: JsonSchema): unknown[] {
  const values: unknown[] = [null, true, 0, 1.5, '', [], {}, shaped(schema, SHAPE_DEPTH)];
  if (schema.default !== undefined) values.push(schema.default);
  if (Array.isArray(schema.examples)) values.push(...(schema.examples as unknown[]));
  return values;
}

/** The JSON Pointer of the first `$dynamicRef` in `schema`, or `undefined`: where a refusal tells the author to look. */
export function firstDynamicRef(schema: unknown, path = ''): string | undefined {
  if (Array.isArray(schema)) {
    for (const [i, item] of schema.entries()) {
      const found = firstDynamicRef(item, `${path}/${i}`);
      if (found !== undefined) return found;
    }
    return undefined;
  }
  if (!isJsonObject(schema)) return undefined;
  if (typeof schema.$dynamicRef === 'string') return `${path}/$dynamicRef`;
  for (const [key, value] of Object.entries(schema)) {
    const found = firstDynamicRef(value, `${path}/${pointerSegment(key)}`);
    if (found !== undefined) return found;
  }
  return undefined;
}
