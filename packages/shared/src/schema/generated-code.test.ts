import { Ajv2020 } from 'ajv/dist/2020.js';
import { describe, expect, it } from 'vitest';
import { compileSchema } from './compile.js';
import { scanGenerated } from './generated-code.js';

describe('scanGenerated', () => {
  it('finds the checks, loops and returns of code, not of its strings, comments or regular expressions', () => {
    const source = 'return function v(data, {a=1}={}){/*# sourceURL="if(x){" */;const s = "if(a){for(b){return}";if(x){for(const k in d){if(y){const p = k.replace(/\\//g, "~1");}}}return errors === 0;}';
    const from = source.indexOf('{/*');
    const code = scanGenerated(source, from);
    expect(code.checks.map((at) => source.slice(at, at + 4))).toEqual(['if(x', 'if(y']);
    expect(code.loops.map((at) => source.slice(at - 2, at + 1))).toEqual(['d){']);
    expect(code.returns.map((at) => source.slice(at, at + 13))).toEqual(['return errors']);
    expect(code.problems).toEqual([]);
  });

  it('refuses code it does not know rather than leave a loop or a check unseen', () => {
    expect(() => scanGenerated('{const s = `if(`;}')).toThrow(/template literal/);
    expect(() => scanGenerated('{while(x){}}')).toThrow(/loop other than for/);
    expect(() => scanGenerated('{if(x){}')).toThrow(/unclosed \{/);
    expect(() => scanGenerated('{const s = "if(x)}')).toThrow(/unclosed string/);
  });

  it("reads every function ajv writes for the fleet's schemas, names and values that look like code included", () => {
    const schema = {
      type: 'object',
      $defs: { t: { type: 'object', properties: { kids: { type: 'array', items: { $ref: '#/$defs/t' } } }, unevaluatedProperties: false } },
      properties: {
        'if(': { type: 'string', pattern: '^a"\\{\\}' },
        'for(x){': { const: { 'return }': '{' } },
        'errors++;': { type: 'number' },
        t: { $ref: '#/$defs/t' },
        m: { type: 'object', patternProperties: { '^x': { type: 'integer' } }, additionalProperties: false, propertyNames: { maxLength: 3 } },
        c: { contains: { type: 'number', multipleOf: 0.5 }, minContains: 2 },
        u: { uniqueItems: true, prefixItems: [{}], unevaluatedItems: false },
      },
      required: ['if(', 'errors++;'],
    };
    const sources: string[] = [];
    new Ajv2020({ allErrors: true, strict: false, code: { process: (s: string) => (sources.push(s), s) } }).compile(schema);
    for (const source of sources) expect(() => scanGenerated(source, source.indexOf('={}){') + 4)).not.toThrow();
    // Metered, the validator answers as ajv does: the property named `if(` is still named in its message.
    const compiled = compileSchema(schema);
    expect(compiled.ok).toBe(true);
    if (!compiled.ok) return;
    expect(compiled.validate({}).map((i) => [i.path, i.keyword, i.reason])).toEqual([
      ['/if(', 'required', 'is required but missing'],
      ['/errors++;', 'required', 'is required but missing'],
    ]);
    expect(compiled.validate({ 'if(': 'a"{}', 'errors++;': 'x' }).map((i) => i.reason)).toEqual(['must be number']);
    expect(compiled.validate({ 'if(': 'a"{}', 'errors++;': 1, 'for(x){': { 'return }': '{' }, t: { kids: [{ kids: [] }] }, c: [1, 2], u: [1] })).toEqual([]);
  });
});
