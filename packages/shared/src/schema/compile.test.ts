import { describe, expect, it } from 'vitest';
import { compileSchema } from './compile.js';

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
});
