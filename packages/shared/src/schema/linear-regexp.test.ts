import { describe, expect, it } from 'vitest';
import { linearRegExp } from './linear-regexp.js';

describe('linearRegExp', () => {
  // Every character of the Basic Multilingual Plane but the lone surrogates.
  const bmp = Array.from({ length: 0x10000 }, (_, c) => c)
    .filter((c) => c < 0xd800 || c > 0xdfff)
    .map((c) => String.fromCharCode(c));

  it.each(['^.$', '^\\s$', '^\\S$', '^[\\s,]$', '^\\w$', '^\\W$', '^\\d$', '^[^a]$', '^\\p{L}$', '^[^\\s]$', 'a\\b', '^$'])(
    'matches %s as the built-in engine does on every character of the Basic Multilingual Plane',
    (pattern) => {
      const ours = linearRegExp(pattern, 'u');
      const theirs = new RegExp(pattern, 'u');
      const differ = bmp.filter((ch) => ours.test(`${ch}`) !== theirs.test(`${ch}`));
      expect(differ.map((ch) => `U+${ch.charCodeAt(0).toString(16).padStart(4, '0')}`)).toEqual([]);
    },
  );

  it('refuses what only RE2 reads: a pattern is ECMA-262 or invalid', () => {
    for (const pattern of ['(?i)a', '\\z', '[[:alpha:]]', '(?P<x>a)', '\\Q.\\E']) expect(() => linearRegExp(pattern, 'u'), pattern).toThrow(SyntaxError);
  });
});
