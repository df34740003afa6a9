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

describe('linearRegExp and leading lookaheads', () => {
  const email = "^(?!\\.)(?!.*\\.\\.)([A-Za-z0-9_'+\\-\\.]*)[A-Za-z0-9_+-]@([A-Za-z0-9][A-Za-z0-9\\-]*\\.)+[A-Za-z]{2,}$";
  const patterns = [email, '^(?=.*[a-z])(?=.*[A-Z])(?=.*\\d).{8,}$', '^(?!.*admin)[a-z]+$', '^(?=a)', '^(?!(a|b)c)\\w*$', '^(?=[^)]*\\))x'];
  const values = ['ada@example.com', '.ada@example.com', 'a..b@example.com', 'a@b.co', 'a@b', 'Passw0rdX', 'password', 'PASSWORD1', 'Pa1', 'admin', 'sysadmin', 'guest',
    'a', '', 'ac', 'bc', 'cc', 'x)', 'x', 'ab)x', 'Ab1\nxxxxx', 'Ab1\u2028xxxxx', ...Array.from({ length: 200 }, (_, i) => `${'aB3.@x'.repeat(i % 7)}${String.fromCharCode(33 + (i % 90))}`)];

  it.each(patterns)('answers %s as the built-in engine does', (pattern) => {
    const ours = linearRegExp(pattern, 'u');
    const theirs = new RegExp(pattern, 'u');
    for (const value of values) expect(ours.test(value), JSON.stringify(value)).toBe(theirs.test(value));
  });

  it('runs them on RE2, so a value the rest would backtrack on is answered at once', () => {
    // On the backtracking engine '^(?=a)(a+)+$' takes years on this value; split, its parts are RE2's.
    expect(linearRegExp('^(?=a)(a+)+$', 'u').test(`${'a'.repeat(60)}!`)).toBe(false);
    expect(linearRegExp('^(?=a)(a+)+$', 'u').test('aaa')).toBe(true);
  });
});
