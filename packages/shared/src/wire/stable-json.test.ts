import { describe, expect, it } from 'vitest';
import { stableStringify } from './stable-json.js';

describe('stableStringify', () => {
  it('gives equal text for equal values whatever their key order, at every depth', () => {
    const a = { b: 1, a: { y: [1, { q: true, p: null }], x: 'é\n"' } };
    const b = { a: { x: 'é\n"', y: [1, { p: null, q: true }] }, b: 1 };
    expect(stableStringify(a)).toBe(stableStringify(b));
    expect(stableStringify(a)).toBe('{"a":{"x":"é\\n\\"","y":[1,{"p":null,"q":true}]},"b":1}');
  });

  it('is JSON that parses back to the same value', () => {
    const value = { list: [3, 'two', { one: 1.5 }], empty: {}, none: [], s: '\u2028', n: -0.25 };
    expect(JSON.parse(stableStringify(value))).toEqual(value);
  });

  it('leaves out what JSON.stringify leaves out, and writes null for it in arrays', () => {
    expect(stableStringify({ a: undefined, b: 2, f: () => 1 })).toBe('{"b":2}');
    expect(stableStringify([undefined, 1])).toBe('[null,1]');
  });

  it('writes values with toJSON as JSON.stringify does', () => {
    const at = new Date(Date.UTC(2026, 10, 30));
    expect(stableStringify({ at })).toBe(JSON.stringify({ at }));
  });
});
