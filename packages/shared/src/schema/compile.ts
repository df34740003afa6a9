import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import type { SchemaIssue } from '../errors/errors.js';
import { DRAFT_07, DRAFT_2020_12, type JsonSchema } from './json-schema.js';

// ajv-formats is CommonJS with a `default` property; under NodeNext the default
// import is the whole module object, so pick the function out explicitly.
const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ?? addFormatsModule) as (
  ajv: Ajv | Ajv2020,
) => void;

function makeAjv<T extends Ajv | Ajv2020>(ajv: T): T {
  addFormats(ajv);
  return ajv;
}

// One instance per dialect for the whole process: ajv caches compiled code per
// instance, and creating instances is far more expensive than compiling.
// `allErrors` lets clients see every problem at once; `strict: false` admits the
// annotation keywords (`examples`, `x-*`) that real tool schemas carry.
const options = { allErrors: true, strict: false, validateFormats: true } as const;
let ajv2020: Ajv2020 | undefined;
let ajv07: Ajv | undefined;

/** The dialect a schema declares, without the optional trailing `#`; undefined when it declares none (or a non-string). */
function dialectOf(schema: JsonSchema): string | undefined {
  return typeof schema.$schema === 'string' ? schema.$schema.replace(/#$/, '') : undefined;
}

function ajvFor(schema: JsonSchema): Ajv | Ajv2020 {
  const dialect = dialectOf(schema);
  if (dialect === DRAFT_07) return (ajv07 ??= makeAjv(new Ajv(options)));
  return (ajv2020 ??= makeAjv(new Ajv2020(options)));
}

/** The dialects accepted in `$schema` (with or without the trailing `#`). */
export const SUPPORTED_DIALECTS: readonly string[] = Object.freeze([DRAFT_2020_12, DRAFT_07]);

/** A compiled schema: call it with a value, get the issues (empty when valid). */
export type CompiledSchema = (value: unknown) => readonly SchemaIssue[];

// Keyed by the schema object itself: tool definitions are deep-frozen, so the
// same definition always hands the same object back and compiles exactly once.
const cache = new WeakMap<object, CompiledSchema>();

/** A problem found in a schema document itself (not in a value). */
export interface SchemaDefinitionProblem {
  readonly path: string;
  readonly reason: string;
}

/**
 * Checks that `schema` is a valid JSON Schema in a supported dialect and
 * compiles it. Returns the problem instead of throwing so callers can name
 * the tool and the field in their own error.
 */
export function compileSchema(schema: JsonSchema): { ok: true; validate: CompiledSchema } | { ok: false; problem: SchemaDefinitionProblem } {
  const cached = cache.get(schema);
  if (cached) return { ok: true, validate: cached };

  if (schema.$schema !== undefined) {
    const dialect = dialectOf(schema);
    if (dialect === undefined || !SUPPORTED_DIALECTS.includes(dialect)) {
      return {
        ok: false,
        problem: { path: '/$schema', reason: `unsupported JSON Schema dialect ${JSON.stringify(schema.$schema)}; use draft 2020-12 (default) or draft-07` },
      };
    }
  }
  const ajv = ajvFor(schema);
  if (!ajv.validateSchema(schema)) {
    const first = ajv.errors?.[0];
    return {
      ok: false,
      problem: { path: first?.instancePath ?? '', reason: first ? `${first.message ?? 'is invalid'} (JSON Schema keyword '${first.keyword}')` : 'not a valid JSON Schema' },
    };
  }
  let fn: ValidateFunction;
  try {
    fn = ajv.compile(schema);
  } catch (err) {
    return { ok: false, problem: { path: '', reason: err instanceof Error ? err.message : String(err) } };
  }
  const validate: CompiledSchema = (value) => (fn(value) ? [] : toIssues(fn.errors ?? []));
  cache.set(schema, validate);
  return { ok: true, validate };
}

function escapePointer(segment: string): string {
  return segment.replace(/~/g, '~0').replace(/\//g, '~1');
}

/**
 * Ajv reports a missing property at its parent; people want the path of the
 * field they must add, so `required` and `additionalProperties` point at the
 * property itself.
 */
function toIssues(errors: readonly ErrorObject[]): SchemaIssue[] {
  return errors.map((e) => {
    const params = e.params as Record<string, unknown>;
    if (e.keyword === 'required' && typeof params.missingProperty === 'string') {
      return { path: `${e.instancePath}/${escapePointer(params.missingProperty)}`, reason: 'is required but missing', keyword: e.keyword };
    }
    if (e.keyword === 'additionalProperties' && typeof params.additionalProperty === 'string') {
      return {
        path: `${e.instancePath}/${escapePointer(params.additionalProperty)}`,
        reason: 'is not a property this schema allows',
        keyword: e.keyword,
      };
    }
    const allowed = e.keyword === 'enum' && Array.isArray(params.allowedValues) ? `: ${params.allowedValues.map((v) => JSON.stringify(v)).join(', ')}` : '';
    return { path: e.instancePath, reason: `${e.message ?? 'is invalid'}${allowed}`, keyword: e.keyword };
  });
}
