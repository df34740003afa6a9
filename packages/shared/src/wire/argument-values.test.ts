import { describe, expect, it } from 'vitest';
import { argumentValueProblem, nonFiniteNumberError } from './argument-values.js';

const parsed = (text: string): unknown => JSON.parse(text) as unknown;

describe("what a call's arguments may hold", () => {
  it('finds the first non-finite number with its path, in document order', () => {
    expect(argumentValueProblem({ a: 1, b: [0, { c: Number.NaN }], d: Infinity })?.details).toMatchObject({ path: 'b[1].c' });
    expect(argumentValueProblem(parsed('{"x":{"y":[1e400]}}'))?.message).toContain("at 'x.y[0]' (it is Infinity");
    expect(argumentValueProblem(-Infinity)?.message).toContain("at 'arguments' (it is -Infinity");
    expect(argumentValueProblem({ max: Number.MAX_VALUE, s: 'Infinity', n: null, list: [1, 2] })).toBeUndefined();
  });

  it('refuses a prototype key anywhere, as JSON.parse makes it, naming where', () => {
    for (const key of ['__proto__', 'constructor', 'prototype']) {
      const problem = argumentValueProblem(parsed(`{"ok":{"list":[{"${key}":{"polluted":true}}]}}`));
      expect(problem).toMatchObject({ code: 'BAD_REQUEST', httpStatus: 400, details: { key } });
      expect(problem?.message).toContain(`'${key}' (at 'ok.list[0].${key}')`);
    }
    expect(argumentValueProblem({ proto: 1, constructorName: 'x', prototypes: [] })).toBeUndefined();
  });

  it('names the first problem in document order, whatever its kind, so every entrance names the same one', () => {
    expect(argumentValueProblem(parsed('{"__proto__":{},"a":1e400}'))?.message).toContain("the key '__proto__'");
    expect(argumentValueProblem(parsed('{"a":1e400,"__proto__":{}}'))?.message).toContain('number JSON cannot carry');
    // Depth first: a problem inside an earlier key's value comes before a later key.
    expect(argumentValueProblem(parsed('{"a":{"b":[1e400]},"constructor":1}'))?.message).toContain("at 'a.b[0]'");
    expect(argumentValueProblem(parsed('{"a":{"b":{"c":{}}},"n":1e400}'), 3)?.message).toMatch(/deeper than 3 levels at 'a\.b\.c'/);
    expect(argumentValueProblem(parsed('{"n":1e400,"a":{"b":{"c":{}}}}'), 3)?.message).toContain("at 'n'");
  });

  it('bounds nesting only when given a depth; the arguments object is depth 1', () => {
    const deep = parsed(`${'['.repeat(5000)}${']'.repeat(5000)}`);
    expect(argumentValueProblem(deep)).toBeUndefined();
    expect(argumentValueProblem(deep, 32)?.message).toMatch(/deeper than 32 levels at '(\[0\]){32}'.*FORGE_MAX_JSON_DEPTH/);
    expect(argumentValueProblem({ a: { b: 1 } }, 2)).toBeUndefined();
    expect(argumentValueProblem({ a: { b: {} } }, 2)?.message).toContain("at 'a.b'");
  });

  it('is refused as BAD_REQUEST naming the path and what to send instead', () => {
    const error = nonFiniteNumberError('a', Infinity);
    expect(error).toMatchObject({ code: 'BAD_REQUEST', httpStatus: 400 });
    expect(error.message).toMatch(/number JSON cannot carry at 'a' \(it is Infinity.*send a finite number, or the value as a string/);
    expect(nonFiniteNumberError('', Number.NaN).message).toContain("at 'arguments' (it is NaN, which JSON has no way to write)");
  });
});
