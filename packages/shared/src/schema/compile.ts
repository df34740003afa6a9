import { createHash } from 'node:crypto';
import { Ajv, type ErrorObject, type Options, type ValidateFunction } from 'ajv';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import type { SchemaIssue } from '../errors/errors.js';
import { PATTERN_BUDGET_MS, PatternTooSlow, withPatternBudget } from './bounded-regexp.js';
import { DRAFT_07, DRAFT_2020_12, type JsonSchema } from './json-schema.js';
import { linearRegExp } from './linear-regexp.js';
import { firstDynamicRef, probeValues } from './probes.js';
import { FuelExhausted, fuelInstance, meterValidation, PROBLEMS_BASE, PROBLEMS_PER_NODE, REF_CALLS_BASE, REF_CALLS_PER_NODE, withValidationFuel, WORK_BASE, WORK_PER_NODE } from './validation-fuel.js';
import { schemaSizeExcess } from './schema-size.js';
import { uniqueItemsKeyword } from './unique-items.js';
import { pointerSegment } from '../wire/json-pointer.js';

// ajv-formats is CommonJS with a `default` property; under NodeNext the default
// import is the whole module object, so pick the function out explicitly.
const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ?? addFormatsModule) as (
  ajv: Ajv | Ajv2020,
) => void;

/**
 * The validator's settings, the same in every process (dispatcher and worker
 * must agree on every answer):
 * - `allErrors` lets clients see every problem at once;
 * - `strict: false` admits the annotation keywords (`examples`, `x-*`) that real tool schemas carry;
 * - `validateFormats: true`: `format` asserts, in both dialects (a deliberate choice, see docs/schemas.md);
 * - `ownProperties: true`: `required`, `properties` and friends see only the arguments' own keys, never
 *   inherited ones (`{}` does not have a `constructor` or a `toString`);
 * - `code.regExp`: patterns match in linear time where RE2 reads them (linear-regexp.ts), so no argument can make
 *   a pattern backtrack for ever;
 * - `uniqueItems` is the fleet's own, linear in the array (unique-items.ts), for the same reason;
 * - `logger: false`: ajv's warnings (unknown formats, keywords beside a draft-07 `$ref`) would go to the
 *   console, outside the structured log; what they warn about is in docs/schemas.md;
 * - `inlineRefs: 8`: a `$ref` to a target of more than 8 keywords calls the target's function instead of holding
 *   a copy of its code, so what ajv generates grows with the schema's size, not with size times the refs to it
 *   (ajv's default copied any target without refs: one definition into each of 400 refs made 16,000 subschemas of
 *   code, seconds of compiling, from a schema of 442; schema-size.ts bounds the size itself). Small targets (a
 *   `{ type, minLength }`) are still copied, as cheap as a call and unmetered; each call is metered (validation-fuel.ts).
 */
export const VALIDATOR_OPTIONS = {
  allErrors: true,
  strict: false,
  validateFormats: true,
  ownProperties: true,
  logger: false,
  inlineRefs: 8,
  code: { regExp: linearRegExp },
} as const satisfies Options;

/** The dialects accepted in `$schema` (with or without the trailing `#`). */
export const SUPPORTED_DIALECTS: readonly string[] = Object.freeze([DRAFT_2020_12, DRAFT_07]);

/**
 * Most distinct schemas kept compiled besides those of live definitions (which
 * keep their own validator, see {@link compileSchema}). A dispatcher meets a new
 * schema each time a tool changes; the oldest ones go first.
 */
export const MAX_CACHED_SCHEMAS = 1000;

/** The dialect a schema declares, without the optional trailing `#`; undefined when it declares none (or a non-string). */
function dialectOf(schema: JsonSchema): string | undefined {
  return typeof schema.$schema === 'string' ? schema.$schema.replace(/#$/, '') : undefined;
}

function newAjv(draft07: boolean, options: Options = {}): Ajv | Ajv2020 {
  const ajv = draft07 ? new Ajv({ ...VALIDATOR_OPTIONS, ...options }) : new Ajv2020({ ...VALIDATOR_OPTIONS, ...options });
  fuelInstance(ajv);
  addFormats(ajv);
  ajv.removeKeyword('uniqueItems');
  ajv.addKeyword(uniqueItemsKeyword);
  return ajv;
}

// Schema documents are checked against their meta-schema by one instance per
// dialect, which compiles nothing else: nothing a tool declares is ever added to it.
let meta2020: Ajv | Ajv2020 | undefined;
let meta07: Ajv | Ajv2020 | undefined;
const metaFor = (draft07: boolean): Ajv | Ajv2020 => (draft07 ? (meta07 ??= newAjv(true)) : (meta2020 ??= newAjv(false)));

/** A compiled schema: call it with a value, get the issues (empty when valid). */
export type CompiledSchema = (value: unknown) => readonly SchemaIssue[];

// Keyed by the schema object itself: tool definitions are deep-frozen, so the
// same definition always hands the same object back and finds its validator
// without hashing. Held as long as the definition is.
const byObject = new WeakMap<object, CompiledSchema>();
// Keyed by the schema's content: a definition parsed again (the worker re-checks
// what a tools module defined; a dispatcher re-reads the catalog) compiles once.
// A Map keeps insertion order, so its first key is the least recently used.
const byContent = new Map<string, CompiledSchema>();

function remember(key: string, validate: CompiledSchema): void {
  byContent.delete(key);
  byContent.set(key, validate);
  if (byContent.size > MAX_CACHED_SCHEMAS) byContent.delete(byContent.keys().next().value as string);
}

/** A problem found in a schema document itself (not in a value). */
export interface SchemaDefinitionProblem {
  readonly path: string;
  readonly reason: string;
}

/**
 * What a refusal says when the validator overflows its stack, or follows refs
 * past the allowance (validation-fuel.ts) on a trial value while the schema has a
 * `$dynamicRef`, naming where the author should look.
 */
function unboundedRecursion(
  schema: JsonSchema,
  when: 'compiling it' | 'validating a trial value',
  how: 'overflows its stack' | 'follows its $refs without end' = 'overflows its stack',
): SchemaDefinitionProblem {
  const at = firstDynamicRef(schema);
  const where = at === undefined ? 'its $ref chain (refs that lead back to themselves through changing $id base URIs)' : `the $dynamicRef at '${at}'`;
  return {
    path: at ?? '',
    reason:
      `the validator ${how} ${when}: this schema recurses without bound in the validator (ajv) the fleet uses; ` +
      `change ${where} — replace a $dynamicRef with a plain $ref to the schema it should reach, and give refs targets inside one $id scope (see docs/schemas.md)`,
  };
}

/**
 * The issue of a value the validator stopped checking, and why: where in the
 * value is not known, the check ended inside the validator.
 */
function unchecked(keyword: string, why: string, fix: string): SchemaIssue {
  return Object.freeze({ path: '', keyword, reason: `could not be checked: ${why}; ${fix}` });
}

/** The one issue a call gets when validating its value overflowed the stack anyway (see docs/schemas.md). */
const STACK_ISSUE = unchecked(
  '$ref',
  "validating it overflowed the validator's stack (the value nests too deeply for a recursive schema, or the schema recurses without bound)",
  "send a less deeply nested value, or ask the schema's author to bound its recursion",
);

/** Where a schema's refs multiply: what a refusal of the schema, or of a value, tells its author to change. */
const FAN_IN =
  "the schema's $refs reach one subschema by many paths at once (anyOf, oneOf or allOf over $refs that lead, level after level, " +
  'to the same schema), so the validator repeats the same work over and over';

/** A schema whose validation of a trial value already ran out of ref calls: every call would. */
function refFanIn(limit: number): SchemaDefinitionProblem {
  return {
    path: '',
    reason:
      `the validator follows this schema's $refs more than ${limit} times on a small trial value: ${FAN_IN}, ` +
      'or they lead back to themselves through changing $id base URIs; make each level refer to the one below once, and give refs targets inside one $id scope (see docs/schemas.md)',
  };
}

/** The one issue a call gets when its value made the validator follow the schema's refs past the allowance (validation-fuel.ts). */
const refCallsIssue = (limit: number): SchemaIssue =>
  unchecked(
    '$ref',
    `the validator followed the schema's $refs more than ${limit} times on this value (${REF_CALLS_BASE} plus ${REF_CALLS_PER_NODE} per value it holds): ${FAN_IN}`,
    "send a smaller or less deeply nested value, or ask the schema's author to bound the schema's fan-in (see docs/schemas.md)",
  );

/** The one issue a call gets when its value made the validator make more problems than its allowance (validation-fuel.ts). */
const problemsIssue = (limit: number): SchemaIssue =>
  unchecked(
    'anyOf',
    `checking it made more than ${limit} problems (${PROBLEMS_BASE} plus ${PROBLEMS_PER_NODE} per value it holds, counting each union branch it failed on the way)`,
    "send a smaller value, or ask the schema's author to narrow its unions (anyOf, oneOf) (see docs/schemas.md)",
  );

/** The one issue a call gets when checking its value made more of the validator's checks than its allowance (validation-fuel.ts). */
const workIssue = (limit: number): SchemaIssue =>
  unchecked(
    'allOf',
    `checking it made more than ${limit} of the validator's checks (${WORK_BASE} plus ${WORK_PER_NODE} per value it holds): the schema applies more subschemas to each item than the value's size allows`,
    "send a smaller value, or ask the schema's author to apply fewer subschemas to each item (see docs/schemas.md)",
  );

/** The one issue a call gets when a validation ran out of one of its allowances. */
function fuelIssue(err: FuelExhausted): SchemaIssue {
  switch (err.kind) {
    case 'refs':
      return refCallsIssue(err.limit);
    case 'problems':
      return problemsIssue(err.limit);
    case 'work':
      return workIssue(err.limit);
  }
}

/** The one issue a call gets when a pattern only the backtracking engine reads was stopped on its value (bounded-regexp.ts). */
const patternTooSlowIssue = (pattern: string): SchemaIssue =>
  unchecked(
    'pattern',
    `the schema's pattern ${JSON.stringify(pattern)} backtracks on this value for more than ${PATTERN_BUDGET_MS} ms ` +
      '(it uses lookaround or backreferences, so it runs on the backtracking engine)',
    "send a value the pattern settles sooner, or ask the schema's author to write the pattern without lookaround and backreferences (see docs/schemas.md)",
  );

/**
 * Checks that `schema` is a valid JSON Schema in a supported dialect, compiles
 * it and tries it on a few values. Returns the problem instead of throwing so
 * callers can name the tool and the field in their own error.
 *
 * Each schema is compiled by an ajv instance of its own: its `$id`s (and those
 * of its subschemas) are scoped to it, so two tools may share an `$id`, a new
 * version of a tool may keep its `$id`, and no schema can `$ref` another tool's.
 * A validation that still overflows its stack at call time, follows refs past
 * its allowance (validation-fuel.ts) or runs a lookaround pattern past its time
 * (bounded-regexp.ts) answers one issue (never throws), so every caller turns
 * it into a typed, non-retryable error.
 */
export function compileSchema(schema: JsonSchema): { ok: true; validate: CompiledSchema } | { ok: false; problem: SchemaDefinitionProblem } {
  const cached = byObject.get(schema);
  if (cached) return { ok: true, validate: cached };
  const key = createHash('sha256').update(JSON.stringify(schema)).digest('base64url');
  const known = byContent.get(key);
  if (known) {
    remember(key, known);
    byObject.set(schema, known);
    return { ok: true, validate: known };
  }

  // Before ajv sees it: compiling costs time with the schema's size and depth, and an MCP server's schema is anyone's.
  const excess = schemaSizeExcess(schema);
  if (excess !== undefined) return { ok: false, problem: excess };
  if (schema.$schema !== undefined) {
    const dialect = dialectOf(schema);
    if (dialect === undefined || !SUPPORTED_DIALECTS.includes(dialect)) {
      return {
        ok: false,
        problem: { path: '/$schema', reason: `unsupported JSON Schema dialect ${JSON.stringify(schema.$schema)}; use draft 2020-12 (default) or draft-07` },
      };
    }
  }
  const draft07 = dialectOf(schema) === DRAFT_07;
  const meta = metaFor(draft07);
  if (!meta.validateSchema(schema)) {
    const first = meta.errors?.[0];
    return {
      ok: false,
      problem: { path: first?.instancePath ?? '', reason: first ? `${first.message ?? 'is invalid'} (JSON Schema keyword '${first.keyword}')` : 'not a valid JSON Schema' },
    };
  }
  let fn: ValidateFunction;
  try {
    // Checked against the meta-schema just above: the instance need not compile the meta-schema again. Metered: every
    // ref target compiled as a function spends one call on entry, and every problem one of the allowance (validation-fuel.ts).
    fn = newAjv(draft07, { validateSchema: false, code: { ...VALIDATOR_OPTIONS.code, process: meterValidation } }).compile(schema);
  } catch (err) {
    if (err instanceof RangeError) return { ok: false, problem: unboundedRecursion(schema, 'compiling it') };
    return { ok: false, problem: { path: '', reason: err instanceof Error ? err.message : String(err) } };
  }
  // One validation, within every bound: the ref calls and problems it may make, the time its lookaround patterns may take.
  const bounded = (value: unknown): boolean => withValidationFuel(value, () => withPatternBudget(() => fn(value)));
  for (const value of probeValues(schema)) {
    try {
      bounded(value);
    } catch (err) {
      if (err instanceof RangeError) return { ok: false, problem: unboundedRecursion(schema, 'validating a trial value') };
      if (err instanceof FuelExhausted && err.kind === 'refs') {
        // A small value that spends the allowance: refs that never end ($dynamicRef's loop in ajv) or that multiply.
        const problem = firstDynamicRef(schema) === undefined ? refFanIn(err.limit) : unboundedRecursion(schema, 'validating a trial value', 'follows its $refs without end');
        return { ok: false, problem };
      }
      // Only a value can make a pattern slow, fail branches by the thousand or run the code at length, and a trial
      // value is not one a caller sends.
      if (err instanceof PatternTooSlow || err instanceof FuelExhausted) continue;
      return { ok: false, problem: { path: '', reason: `the compiled validator fails on a trial value: ${err instanceof Error ? err.message : String(err)}` } };
    }
  }
  const validate: CompiledSchema = (value) => {
    try {
      return bounded(value) ? [] : toIssues(fn.errors ?? []);
    } catch (err) {
      if (err instanceof RangeError) return [STACK_ISSUE];
      if (err instanceof FuelExhausted) return [fuelIssue(err)];
      if (err instanceof PatternTooSlow) return [patternTooSlowIssue(err.pattern)];
      throw err;
    }
  };
  remember(key, validate);
  byObject.set(schema, validate);
  return { ok: true, validate };
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
      return { path: `${e.instancePath}/${pointerSegment(params.missingProperty)}`, reason: 'is required but missing', keyword: e.keyword };
    }
    if (e.keyword === 'additionalProperties' && typeof params.additionalProperty === 'string') {
      return {
        path: `${e.instancePath}/${pointerSegment(params.additionalProperty)}`,
        reason: 'is not a property this schema allows',
        keyword: e.keyword,
      };
    }
    const allowed = e.keyword === 'enum' && Array.isArray(params.allowedValues) ? `: ${params.allowedValues.map((v) => JSON.stringify(v)).join(', ')}` : '';
    return { path: e.instancePath, reason: `${e.message ?? 'is invalid'}${allowed}`, keyword: e.keyword };
  });
}
