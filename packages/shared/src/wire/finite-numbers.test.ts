import { describe, expect, it } from 'vitest';
import { findNonFiniteNumber, nonFiniteNumberError } from './finite-numbers.js';

describe('numbers JSON cannot carry', () => {
  it('finds the first non-finite number with its path, in document order', () => {
    expect(findNonFiniteNumber({ a: 1, b: [0, { c: Number.NaN }], d: Infinity })).toEqual({ path: 'b[1].c', value: Number.NaN });
    expect(findNonFiniteNumber(JSON.parse('{"x":{"y":[1e400]}}'))).toEqual({ path: 'x.y[0]', value: Infinity });
    expect(findNonFiniteNumber(-Infinity)).toEqual({ path: '', value: -Infinity });
    expect(findNonFiniteNumber({ max: Number.MAX_VALUE, s: 'Infinity', n: null, list: [1, 2] })).toBeUndefined();
  });

  it('is refused as BAD_REQUEST naming the path and what to send instead', () => {
    const error = nonFiniteNumberError('a', Infinity);
    expect(error).toMatchObject({ code: 'BAD_REQUEST', httpStatus: 400 });
    expect(error.message).toMatch(/number JSON cannot carry at 'a' \(it is Infinity.*send a finite number, or the value as a string/);
    expect(nonFiniteNumberError('', Number.NaN).message).toContain("at 'arguments' (it is NaN, which JSON has no way to write)");
  });
});
