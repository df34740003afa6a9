import { describe, expect, it } from 'vitest';
import { lostKeyPaths } from './lost-keys.js';

describe('lostKeyPaths', () => {
  it('finds __proto__ as an own key at any depth, in objects and arrays', () => {
    const value = JSON.parse('{"a": {"__proto__": {"x": 1}}, "b": [{"c": {"__proto__": 2}}], "__proto__": []}') as unknown;
    expect(lostKeyPaths(value)).toEqual([['a', '__proto__'], ['b', 0, 'c', '__proto__'], ['__proto__']]);
  });

  it('finds nothing in plain data, including keys that merely look special', () => {
    expect(lostKeyPaths({ constructor: { prototype: 1 }, toString: 'x', list: [1, null, 'a'] })).toEqual([]);
    expect(lostKeyPaths(null)).toEqual([]);
    expect(lostKeyPaths('text')).toEqual([]);
  });
});
