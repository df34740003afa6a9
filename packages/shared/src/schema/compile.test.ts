import { describe, expect, it } from 'vitest';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { compileSchema } from './compile.js';
import { DRAFT_2020_12 } from './json-schema.js';

function compile(schema: Record<string, unknown>) {
  const compiled = compileSchema(schema);
  if (!compiled.ok) throw new Error(compiled.problem.reason);
  return compiled.validate;
}

describe('compileSchema', () => {
  it('compiles a schema once and reuses it', () => {
    const schema = Object.freeze({ type: 'object' });
    const a = compileSchema(schema);
    const b = compileSchema(schema);
    expect(a.ok && b.ok && a.validate === b.validate).toBe(true);
  });

  it('reports every issue, first failing field first', () => {
    const validate = compile({ type: 'object', properties: { a: { type: 'string' }, b: { minimum: 3 } }, required: ['c'] });
    const issues = validate({ a: 1, b: 1 });
    expect(issues.map((i) => [i.path, i.keyword])).toEqual([
      ['/c', 'required'],
      ['/a', 'type'],
      ['/b', 'minimum'],
    ]);
  });

  it('checks formats (ajv-formats) and names allowed enum values', () => {
    const validate = compile({ type: 'object', properties: { email: { type: 'string', format: 'email' }, mode: { enum: ['fast', 'safe'] } } });
    expect(validate({ email: 'not-an-email' })[0]).toMatchObject({ path: '/email', keyword: 'format' });
    expect(validate({ mode: 'wild' })[0]?.reason).toContain('"fast", "safe"');
    expect(validate({ email: 'a@b.co', mode: 'safe' })).toEqual([]);
  });

  it('points at properties a closed schema does not allow', () => {
    const validate = compile({ type: 'object', properties: {}, additionalProperties: false });
    expect(validate({ 'a/b': 1 })[0]).toMatchObject({ path: '/a~1b', keyword: 'additionalProperties' });
  });

  it('uses draft 2020-12 by default (prefixItems) and draft-07 when declared', () => {
    const v2020 = compile({ type: 'array', prefixItems: [{ type: 'number' }] });
    expect(v2020(['x'])).toHaveLength(1);
    const v07 = compile({ $schema: 'http://json-schema.org/draft-07/schema#', type: 'array', items: [{ type: 'number' }] });
    expect(v07(['x'])).toHaveLength(1);
  });

  it('admits annotation keywords real tool schemas carry', () => {
    expect(compileSchema({ type: 'object', examples: [{}], 'x-internal': true }).ok).toBe(true);
  });

  it('compiles a schema with a root $id as often as it is parsed again (the worker re-checks what a tools module defined)', () => {
    const schema = () => ({ $id: 'https://tools.example/search', type: 'object', properties: { q: { type: 'string' } } });
    expect(compileSchema(schema()).ok).toBe(true);
    const again = compileSchema(schema());
    expect(again.ok && again.validate({ q: 1 })).toHaveLength(1);
  });

  it('scopes $ids to each schema: two tools (or two versions of one) may share an $id, each keeps its own rules', () => {
    const v1 = compile({ $id: 'https://tools.example/shared', type: 'object', properties: { n: { type: 'string' } }, $defs: { inner: { $id: 'inner', type: 'string' } } });
    const v2 = compile({ $id: 'https://tools.example/shared', type: 'object', properties: { n: { type: 'number' } }, $defs: { inner: { $id: 'inner', type: 'number' } } });
    expect(v1({ n: 'a' })).toEqual([]);
    expect(v1({ n: 1 })).toHaveLength(1);
    expect(v2({ n: 1 })).toEqual([]);
    expect(v2({ n: 'a' })).toHaveLength(1);
  });

  it("never resolves a $ref to another tool's schema", () => {
    compile({ $id: 'https://tools.example/victim', type: 'object', properties: { secret: { const: 42 } } });
    const thief = compileSchema({ type: 'object', properties: { x: { $ref: 'https://tools.example/victim' } } });
    expect(thief.ok).toBe(false);
    expect(!thief.ok && thief.problem.reason).toMatch(/can't resolve reference/);
  });

  it('sees only own properties: inherited names neither satisfy required nor get checked by properties', () => {
    const validate = compile({ type: 'object', properties: { constructor: { type: 'number' } }, required: ['toString', 'constructor'] });
    expect(validate({}).map((i) => [i.path, i.keyword])).toEqual([
      ['/toString', 'required'],
      ['/constructor', 'required'],
    ]);
    expect(validate({ toString: 'x', constructor: 1 })).toEqual([]);
  });

  // JSON-Schema-Test-Suite, draft2020-12 unevaluatedProperties.json "unevaluatedProperties with $dynamicRef":
  // valid 2020-12 that ajv cannot evaluate — its validator recurses until the stack overflows, whatever the value.
  const dynamicRefLoop = {
    $schema: DRAFT_2020_12,
    $id: 'https://example.com/unevaluated-properties-with-dynamic-ref/derived',
    $ref: './baseSchema',
    $defs: {
      derived: { $dynamicAnchor: 'addons', properties: { bar: { type: 'string' } } },
      baseSchema: {
        $id: './baseSchema',
        unevaluatedProperties: false,
        properties: { foo: { type: 'string' } },
        $dynamicRef: '#addons',
        $defs: { defaultAddons: { $dynamicAnchor: 'addons' } },
      },
    },
  };

  it('refuses a schema whose validator follows its refs without end, pointing at the $dynamicRef to change', () => {
    const compiled = compileSchema(dynamicRefLoop);
    expect(compiled.ok).toBe(false);
    expect(!compiled.ok && compiled.problem.path).toBe('/$defs/baseSchema/$dynamicRef');
    expect(!compiled.ok && compiled.problem.reason).toMatch(/follows its \$refs without end validating a trial value.*replace a \$dynamicRef with a plain \$ref/);
  });

  it('refuses a schema whose compilation overflows the stack (ref.json "URN ref with nested pointer ref")', () => {
    const compiled = compileSchema({
      $schema: DRAFT_2020_12,
      $ref: 'urn:uuid:deadbeef-4321-ffff-ffff-1234feebdaed',
      $defs: { foo: { $id: 'urn:uuid:deadbeef-4321-ffff-ffff-1234feebdaed', $defs: { bar: { type: 'string' } }, $ref: '#/$defs/bar' } },
    });
    expect(compiled.ok).toBe(false);
    expect(!compiled.ok && compiled.problem.reason).toMatch(/overflows its stack compiling it.*\$id scope/);
  });

  it('answers an issue, never throws, when a value nests deeper than the validator can follow', () => {
    const validate = compile({ type: 'object', properties: { child: { $ref: '#' } } });
    let deep: Record<string, unknown> = {};
    for (let i = 0; i < 100_000; i++) deep = { child: deep };
    const issues = validate(deep);
    expect(issues.map((i) => [i.path, i.keyword])).toEqual([['', '$ref']]);
    expect(issues[0]?.reason).toMatch(/overflowed the validator's stack/);
  });
});

describe('compileSchema and patterns an argument could make backtrack for ever', () => {
  // Each takes the built-in engine exponential time on its input (26 characters: 0.3 s; 60: years).
  const evil: readonly [string, string][] = [
    ['^(a+)+$', `${'a'.repeat(60)}!`],
    ['^(a|aa)+$', `${'a'.repeat(90)}!`],
    ['^(.*a){25}$', `${'a'.repeat(60)}!`],
    // A common hand-written email pattern with nested quantifiers.
    ['^([a-zA-Z0-9_.-])+@(([a-zA-Z0-9-])+\\.)+([a-zA-Z0-9]{2,4})+$', `${'a'.repeat(40)}@${'a.'.repeat(30)}!`],
  ];

  it.each(evil)('refuses a value for %s in linear time, as pattern, patternProperties and propertyNames', (pattern, input) => {
    expect(compile({ type: 'object', properties: { s: { type: 'string', pattern } } })({ s: input })).toEqual([expect.objectContaining({ path: '/s', keyword: 'pattern' })]);
    expect(compile({ type: 'object', patternProperties: { [pattern]: { type: 'string' } }, additionalProperties: false })({ [input]: 'x' })[0]).toMatchObject({ keyword: 'additionalProperties' });
    expect(compile({ type: 'object', propertyNames: { pattern } })({ [input]: 1 })[0]).toMatchObject({ keyword: 'pattern' });
  });

  it('matches as the built-in engine does for what both engines read: unanchored, Unicode, classes, escapes', () => {
    const cases: readonly [string, string, boolean][] = [
      ['b', 'abc', true],
      ['^b', 'abc', false],
      ['^\\d{3}-\\d{4}$', '555-1234', true],
      ['^\\p{L}+$', 'héllo', true],
      ['^.$', '😀', true],
      ['^[a-z]+$', 'abc\n', false],
      ['^\\w+@\\w+\\.com$', 'me@x.com', true],
      // RE2's \s is ASCII, JavaScript's is not: the fleet's means what the built-in engine's does.
      ['^\\s+$', '\u00a0\u2003\ufeff', true],
      ['^[\\s,]+$', '\u2003,\t', true],
      ['^\\S+$', 'a\u00a0', false],
      ['^[^\\S]+$', '\u3000', true],
      ['^a\\\\s$', 'a\\s', true],
      // RE2's `.` stops only at \n, JavaScript's at every line terminator.
      ['^.$', '\r', false],
      ['^.+$', 'a\u2028b', false],
      ['^a.b$', 'a\u2029b', false],
      ['^[.]$', '.', true],
      ['^\\.$', '\r', false],
      ['^.$', '\u0085', true],
    ];
    for (const [pattern, value, matches] of cases) {
      expect(compile({ type: 'string', pattern })(value).length === 0, `${pattern} on ${JSON.stringify(value)}`).toBe(matches);
      expect(new RegExp(pattern, 'u').test(value)).toBe(matches);
    }
  });

  it('keeps each pattern of one schema its own (ajv keys them by their text)', () => {
    const validate = compile({ type: 'object', patternProperties: { '^a': { type: 'integer' }, '^b': { type: 'string' } }, properties: { c: { type: 'string', pattern: '^x+$' } } });
    expect(validate({ a1: 1, b1: 'x', c: 'xx' })).toEqual([]);
    expect(validate({ a1: 'no', b1: 2, c: 'y' }).map((i) => i.path).sort()).toEqual(['/a1', '/b1', '/c']);
  });

  it('still runs the patterns only the built-in engine reads (lookaround, long Unicode names), zod 4 email among them', () => {
    const email = "^(?!\\.)(?!.*\\.\\.)([A-Za-z0-9_'+\\-\\.]*)[A-Za-z0-9_+-]@([A-Za-z0-9][A-Za-z0-9\\-]*\\.)+[A-Za-z]{2,}$";
    const validate = compile({ type: 'string', pattern: email });
    expect(validate('ada@example.com')).toEqual([]);
    expect(validate('.ada@example.com')).toHaveLength(1);
    expect(compile({ type: 'string', pattern: '^\\p{Letter}+$' })('héllo')).toEqual([]);
  });
});

describe('compileSchema and uniqueItems on arrays an argument makes long', () => {
  // ajv compares every pair of items unless the schema types them as scalars: 20,000 one-key objects (229 KB of
  // JSON, under the dispatcher's argument limit) took it 5 s on the event loop; these 200,000, 500 s.
  const many = (n: number) => Array.from({ length: n }, (_, i) => ({ id: i, tags: ['x', i % 7] }));

  it('checks 200,000 items in one pass and names the duplicates as ajv does', () => {
    const validate = compile({ type: 'object', properties: { xs: { type: 'array', uniqueItems: true } } });
    expect(validate({ xs: many(200_000) })).toEqual([]);
    const xs = many(200_000);
    xs[199_999] = { tags: ['x', 5], id: 5 };
    expect(validate({ xs })).toEqual([{ path: '/xs', keyword: 'uniqueItems', reason: 'must NOT have duplicate items (items ## 5 and 199999 are identical)' }]);
  });

  it('answers as ajv does on every kind of item (key order ignored, array order kept, 1 and "1" apart)', () => {
    const stock = new Ajv2020({ strict: false, allErrors: true });
    // (Not with scalar-typed items: ajv then leaves items of another type out of the comparison, the fleet does not.)
    const schemas = [{ type: 'array', uniqueItems: true }, { type: 'array', uniqueItems: false }, { type: 'array', items: { type: 'object' }, uniqueItems: true }, { uniqueItems: true }];
    const pool: unknown[] = [0, -0, 1, 1.5, '1', '', 'a', true, false, null, [], [1, 2], [2, 1], {}, { a: 1, b: 2 }, { b: 2, a: 1 }, { a: [1, { c: null }] }, { a: [1, { c: null }], b: 1 }, [[]], [{}], { '': 0 }];
    let seed = 7;
    const next = (n: number) => ((seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31), seed % n);
    for (const schema of schemas) {
      const ours = compile(schema);
      const theirs = stock.compile(schema);
      for (let round = 0; round < 500; round++) {
        const value = Array.from({ length: next(6) }, () => structuredClone(pool[next(pool.length)]));
        const expected = theirs(value) ? [] : (theirs.errors ?? []).map((e) => ({ keyword: e.keyword, reason: e.message }));
        expect(ours(value).map((i) => ({ keyword: i.keyword, reason: i.reason })), JSON.stringify([schema, value])).toEqual(expected);
      }
      expect(ours({ not: 'an array' })).toEqual(theirs({ not: 'an array' }) ? [] : expect.any(Array));
    }
  });
});

describe('compileSchema and patterns only the built-in engine reads', () => {
  // A lookahead after the start keeps a pattern off RE2; with nested quantifiers before it, 60 characters take years.
  const lookaround = '^(a+)+(?!b)$';
  const evil = `${'a'.repeat(60)}!`;

  it('stops checking a value the pattern backtracks on, answers an issue naming the pattern, and serves on', () => {
    const validate = compile({ type: 'object', properties: { s: { type: 'string', pattern: lookaround } } });
    const [issue, ...rest] = validate({ s: evil });
    expect(rest).toEqual([]);
    expect(issue).toMatchObject({ keyword: 'pattern' });
    expect(issue?.reason).toContain(JSON.stringify(lookaround));
    expect(issue?.reason).toMatch(/could not be checked/);
    expect(validate({ s: 'aaa' })).toEqual([]);
    expect(validate({ s: 'b' })).toEqual([expect.objectContaining({ path: '/s', keyword: 'pattern' })]);
  });

  it('bounds patternProperties and propertyNames alike', () => {
    const byKey = compile({ type: 'object', patternProperties: { [lookaround]: { type: 'number' } } });
    expect(byKey({ [evil]: 1 })).toEqual([expect.objectContaining({ keyword: 'pattern' })]);
    expect(byKey({ aa: 'x' })).toEqual([expect.objectContaining({ path: '/aa', keyword: 'type' })]);
    const names = compile({ type: 'object', propertyNames: { pattern: lookaround } });
    expect(names({ [evil]: 1 })).toEqual([expect.objectContaining({ keyword: 'pattern' })]);
    expect(names({ aa: 1 })).toEqual([]);
  });
});

describe('compileSchema and refs that reach one subschema by many paths', () => {
  /** 40 levels, each an anyOf over two refs to the level below: 2^40 evaluations of the bottom for any value. */
  function fanIn(levels: number, bottom: Record<string, unknown>): Record<string, unknown> {
    const $defs: Record<string, unknown> = { l0: bottom };
    for (let k = 1; k <= levels; k++) $defs[`l${k}`] = { anyOf: [{ $ref: `#/$defs/l${k - 1}` }, { $ref: `#/$defs/l${k - 1}`, minimum: 0 }] };
    return { $defs, type: 'object', properties: { x: { $ref: `#/$defs/l${levels}` } } };
  }

  it('refuses at definition a schema whose refs multiply on any value, naming what to change', () => {
    const compiled = compileSchema(fanIn(40, { type: 'number' }));
    expect(compiled.ok).toBe(false);
    expect(!compiled.ok && compiled.problem.reason).toMatch(/follows this schema's \$refs more than \d+ times on a small trial value.*anyOf, oneOf or allOf over \$refs/);
  });

  it('answers an issue for a value that makes a recursive schema multiply, and checks ordinary values as before', () => {
    // Two branches, each recursing into every item: 2^depth evaluations of a value nested depth levels.
    const validate = compile({ $defs: { n: { oneOf: [{ type: 'array', items: { $ref: '#/$defs/n' }, maxItems: 1 }, { type: 'array', items: { $ref: '#/$defs/n' }, minItems: 2 }] } }, type: 'object', properties: { t: { $ref: '#/$defs/n' } } });
    let deep: unknown[] = [];
    for (let i = 0; i < 32; i++) deep = [deep];
    expect(validate({ t: deep })).toEqual([expect.objectContaining({ path: '', keyword: '$ref', reason: expect.stringMatching(/followed the schema's \$refs more than \d+ times on this value/) as string })]);
    expect(validate({ t: [[], [[], [[]]]] })).toEqual([]);
    expect(validate({ t: [[], ['x']] }).map((i) => [i.path, i.keyword])).toContainEqual(['/t/1/0', 'type']);
  });

  /** An array whose every item must match one of `n` object branches, each requiring a key of its own. */
  const union = (n: number) => ({ type: 'object', properties: { xs: { type: 'array', items: { anyOf: Array.from({ length: n }, (_, i) => ({ type: 'object', required: [`k${i}`] })) } } } });

  it("stops a validation whose failed branches pile up past the value's allowance of problems, with one issue, before they fill the heap", () => {
    // Every item fails every branch, and with all errors kept each failure is an object: 1,000 × 2,000 = 2,000,000 of
    // them from a 6 KB argument (at 1,990 branches and 40,000 items, 80 million: the dispatcher ran out of heap and died).
    const validate = compile(union(1000));
    const issues = validate({ xs: Array.from({ length: 2000 }, () => ({})) });
    // 10,000 problems, plus 32 for each of the value's 2,002 values.
    expect(issues).toEqual([expect.objectContaining({ path: '', keyword: 'anyOf', reason: expect.stringContaining('made more than 74064 problems') as string })]);
    // The count, hence the answer, is the same every time.
    expect(validate({ xs: Array.from({ length: 2000 }, () => ({})) })).toEqual(issues);
    // However large the value, never more than 100,000 problems (each is an object held until the validation ends).
    expect(validate({ xs: Array.from({ length: 20_000 }, () => ({})) })).toEqual([expect.objectContaining({ reason: expect.stringContaining('made more than 100000 problems') as string })]);
  });

  it('checks unions the usual way: the branches tried before the one that matches cost nothing, and real problems are all listed', () => {
    const validate = compile(union(10));
    // 10,000 items that each match only the last branch: 90,000 failed branches on the way, and the value is valid.
    expect(validate({ xs: Array.from({ length: 10_000 }, () => ({ k9: 1 })) })).toEqual([]);
    // 300 items matching none: every branch's problem is listed, as before.
    const issues = validate({ xs: Array.from({ length: 300 }, () => ({})) });
    expect(issues).toHaveLength(300 * 11);
    expect(issues[0]).toMatchObject({ path: '/xs/0/k0', keyword: 'required' });
  });

  it('stops a validation that runs the checks of a wide schema over every item of a long array, with one issue', () => {
    // 1,990 checks that all pass, for each of 40,000 items: 80 million, 5 to 7 seconds of the loop, and no problem made.
    const validate = compile({ type: 'object', properties: { xs: { type: 'array', items: { allOf: Array.from({ length: 1990 }, () => ({ type: 'object' })) } } } });
    const issues = validate({ xs: Array.from({ length: 40_000 }, () => ({})) });
    expect(issues).toEqual([expect.objectContaining({ path: '', keyword: 'allOf', reason: expect.stringMatching(/made more than \d+ of the validator's checks/) as string })]);
    expect(validate({ xs: Array.from({ length: 40_000 }, () => ({})) })).toEqual(issues);
    // A short array of the same items is checked as before.
    expect(validate({ xs: [{}, {}] })).toEqual([]);
    expect(validate({ xs: [{}, 3] }).map((i) => [i.path, i.keyword])).toContainEqual(['/xs/1', 'type']);
  });

  it('checks a long array against a schema of many optional properties, and unions of $refs, within the allowances', () => {
    const props = Object.fromEntries(Array.from({ length: 200 }, (_, i) => [`p${i}`, { type: 'string', maxLength: 50 }]));
    const sparse = compile({ type: 'object', properties: { xs: { type: 'array', items: { type: 'object', properties: props } } } });
    expect(sparse({ xs: Array.from({ length: 12_000 }, () => ({ p0: 'a', p1: 'b' })) })).toEqual([]);
    // 30 variants, each a definition of its own (called, not copied): 30 calls for each item that matches the last.
    const variant = (k: number) => ({ type: 'object', properties: { kind: { const: `k${k}` }, ...Object.fromEntries(Array.from({ length: 10 }, (_, i) => [`p${i}`, { type: 'string' }])) }, required: ['kind'], additionalProperties: false });
    const $defs = Object.fromEntries(Array.from({ length: 30 }, (_, k) => [`v${k}`, variant(k)]));
    const union = compile({ type: 'object', $defs, properties: { xs: { type: 'array', items: { anyOf: Array.from({ length: 30 }, (_, k) => ({ $ref: `#/$defs/v${k}` })) } } } });
    expect(union({ xs: Array.from({ length: 2000 }, () => ({ kind: 'k29', p0: 'a', p1: 'b', p2: 'c' })) })).toEqual([]);
  });

  it('lets a schema that recurses once per value check a large value', () => {
    const json = { $defs: { v: { anyOf: [{ type: ['string', 'number', 'boolean', 'null'] }, { type: 'array', items: { $ref: '#/$defs/v' } }, { type: 'object', additionalProperties: { $ref: '#/$defs/v' } }] } }, $ref: '#/$defs/v' };
    const validate = compile(json);
    const tree = Array.from({ length: 2000 }, (_, i) => ({ id: i, kids: [[i, 'x', null], { deep: { deeper: [true] } }] }));
    expect(validate(tree)).toEqual([]);
    expect(validate([{ a: [1, { b: undefined }] }]).length).toBeGreaterThan(0);
  });
});
