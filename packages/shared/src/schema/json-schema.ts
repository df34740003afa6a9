import { z } from 'zod';

/**
 * A JSON Schema document as plain JSON. Its meaning is checked by ajv when a
 * tool is defined (see {@link compileSchema}); zod only checks the outer shape.
 */
export const JsonSchema = z.record(z.string(), z.unknown());
export type JsonSchema = z.infer<typeof JsonSchema>;

/** The JSON Schema dialects a tool may declare with `$schema`. Draft 2020-12 is the default. */
export const DRAFT_2020_12 = 'https://json-schema.org/draft/2020-12/schema';
export const DRAFT_07 = 'http://json-schema.org/draft-07/schema';

/** The parameters schema of a tool that declares none: an object with no declared properties. */
export function emptyObjectSchema(): JsonSchema {
  return { type: 'object', properties: {} };
}

/** True for a plain JSON object (not an array, not null). */
export function isJsonObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Names a JSON value's type the way a person reads it in an error message. */
export function jsonTypeOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  if (typeof value === 'number' && Number.isInteger(value)) return 'integer';
  return typeof value;
}
