import { describe, expect, it } from 'vitest';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { compileSchema, VALIDATOR_OPTIONS } from './compile.js';
import { MAX_SCHEMA_DEPTH, MAX_SUBSCHEMAS, schemaSizeExcess } from './schema-size.js';

/** `levels` levels of subschemas, each an object schema holding the next under `x`. */
function nested(levels: number): Record<string, unknown> {
  let schema: Record<string, unknown> = { type: 'string' };
  for (let i = 1; i < levels; i++) schema = { type: 'object', properties: { x: schema } };
  return schema;
}

/** An object schema of `n` string properties: `n + 1` subschemas with the root. */
function wide(n: number): Record<string, unknown> {
  return { type: 'object', properties: Object.fromEntries(Array.from({ length: n }, (_, i) => [`p${i}`, { type: 'string' }])) };
}

describe('schemaSizeExcess', () => {
  it('counts subschemas under every kind of keyword, and not data', () => {
    const data = Array.from({ length: 5000 }, (_, i) => ({ k: i }));
    const schema = {
      type: 'object',
      properties: { a: { anyOf: [{ type: 'string' }, { type: 'number' }] }, default: { items: { type: 'string' } } },
      $defs: { d: { not: { const: 1 } } },
      enum: data,
      const: data,
      default: data,
      examples: data,
      'x-vendor': data,
    };
    expect(schemaSizeExcess(schema)).toBeUndefined();
    expect(schemaSizeExcess(wide(MAX_SUBSCHEMAS - 1))).toBeUndefined();
    expect(schemaSizeExcess(wide(MAX_SUBSCHEMAS))).toMatchObject({ reason: expect.stringContaining(`more than ${MAX_SUBSCHEMAS} subschemas`) as string });
    // A property named like a data keyword is a subschema all the same.
    const named = { type: 'object', properties: Object.fromEntries(Array.from({ length: MAX_SUBSCHEMAS }, (_, i) => [i === 0 ? 'enum' : `p${i}`, { type: 'string' }])) };
    expect(schemaSizeExcess(named)).toBeDefined();
    // Array-valued keywords count each entry.
    expect(schemaSizeExcess({ anyOf: Array.from({ length: MAX_SUBSCHEMAS }, () => ({ type: 'string' })) })).toBeDefined();
  });

  it('measures depth with a stack of its own, naming where the schema passes it', () => {
    expect(schemaSizeExcess(nested(MAX_SCHEMA_DEPTH))).toBeUndefined();
    const excess = schemaSizeExcess(nested(MAX_SCHEMA_DEPTH + 1));
    expect(excess?.reason).toContain(`more than ${MAX_SCHEMA_DEPTH} levels`);
    expect(excess?.path).toBe('/properties/x'.repeat(MAX_SCHEMA_DEPTH));
    // 100,000 levels (the JSON of a hostile listing can hold them) are refused, not a stack overflow.
    expect(schemaSizeExcess(nested(100_000))).toBeDefined();
  });
});

describe('compileSchema refuses what the validator cannot compile in bounded time', () => {
  it('a schema with too many subschemas, or nested too deep, naming the bound', () => {
    const big = compileSchema(wide(20_000));
    expect(big).toMatchObject({ ok: false, problem: { reason: expect.stringContaining(`more than ${MAX_SUBSCHEMAS} subschemas`) as string } });
    const deep = compileSchema(nested(400));
    expect(deep).toMatchObject({ ok: false, problem: { reason: expect.stringContaining(`more than ${MAX_SCHEMA_DEPTH} levels`) as string } });
    // Within the bounds both compile and validate.
    const ok = compileSchema(wide(MAX_SUBSCHEMAS - 1));
    expect(ok.ok && ok.validate({ p0: 'a', p1: 2 })).toEqual([expect.objectContaining({ path: '/p1', keyword: 'type' })]);
    const deepOk = compileSchema(nested(MAX_SCHEMA_DEPTH));
    expect(deepOk.ok).toBe(true);
  });

  it('compiles a definition that many $refs reach once, not once per $ref', () => {
    // 400 refs to one 40-property definition: inlined at each ref, that is 16,000 subschemas of code from a schema of 442.
    const def = wide(40);
    const schema = { type: 'object', $defs: { d: def }, properties: Object.fromEntries(Array.from({ length: 400 }, (_, i) => [`p${i}`, { $ref: '#/$defs/d' }])) };
    const compiled = compileSchema(schema);
    expect(compiled.ok).toBe(true);
    if (!compiled.ok) return;
    expect(compiled.validate({ p0: { p1: 'a' }, p7: { p2: 3 } })).toEqual([expect.objectContaining({ path: '/p7/p2', keyword: 'type' })]);
    // The code generated with the fleet's settings calls the definition at each ref instead of holding a copy there:
    // its root function grows by a call per ref, not by the definition's 41 subschemas per ref.
    const root = new Ajv2020({ ...VALIDATOR_OPTIONS, validateSchema: false }).compile(schema).toString();
    expect(root.length).toBeLessThan(41 * 400 * 50);
  });
});
