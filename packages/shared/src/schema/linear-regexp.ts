import type { RegExpEngine } from 'ajv/dist/types/index.js';
import { RE2JS } from 're2js';
import { boundedTest } from './bounded-regexp.js';
import { leadingLookaheads } from './leading-lookaheads.js';

/** What `\s` matches in JavaScript (with the `u` flag), in RE2's syntax: RE2's own `\s` is ASCII only. */
const JS_SPACE = '\\t\\n\\x{0B}\\f\\r \\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}\\x{FEFF}';

/** What `.` matches in JavaScript (without the `s` flag), in RE2's syntax: RE2's own `.` stops only at `\n`. */
const ANY_BUT_LINE_END = '[^\\n\\r\\x{2028}\\x{2029}]';

/**
 * `pattern` for RE2 with JavaScript's meaning, or undefined where that is
 * not written as easily (`\S` inside a class). Of the escapes, classes and
 * anchors both engines read, compared on every character of the Basic
 * Multilingual Plane (linear-regexp.test.ts), `\s` and `\S` matched
 * differently (RE2's are ASCII) and so did `.` (RE2's matches `\r`, U+2028
 * and U+2029); the sets written for them match as the built-in engine's.
 */
export function forRe2(pattern: string): string | undefined {
  let out = '';
  let inClass = false;
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === '\\' && i + 1 < pattern.length) {
      const next = pattern[i + 1];
      i += 1;
      if (next === 's') out += inClass ? JS_SPACE : `[${JS_SPACE}]`;
      else if (next === 'S') {
        if (inClass) return undefined;
        out += `[^${JS_SPACE}]`;
      } else out += `\\${next}`;
      continue;
    }
    if (c === '.' && !inClass) {
      out += ANY_BUT_LINE_END;
      continue;
    }
    if (c === '[' && !inClass) inClass = true;
    else if (c === ']' && inClass) inClass = false;
    out += c;
  }
  return out;
}

/** `pattern` compiled by RE2, or undefined where RE2 does not read it. */
function compileRe2(pattern: string): RE2JS | undefined {
  try {
    return RE2JS.compile(pattern);
  } catch {
    return undefined;
  }
}

/** `pattern`, with JavaScript's meaning, on RE2; undefined where RE2 does not read it. */
function onRe2(pattern: string): RE2JS | undefined {
  const translated = forRe2(pattern);
  return translated === undefined ? undefined : compileRe2(translated);
}

/** A pattern with leading lookaheads as RE2 matches of its parts (leading-lookaheads.ts); undefined where a part is not RE2's. */
function splitOnRe2(pattern: string): ((value: string) => boolean) | undefined {
  const parts = leadingLookaheads(pattern);
  if (parts === undefined) return undefined;
  const rest = onRe2(`^(?:${parts.rest})`);
  const asserts: { negate: boolean; re2: RE2JS }[] = [];
  for (const { negate, body } of parts.asserts) {
    const re2 = onRe2(`^(?:${body})`);
    if (re2 === undefined) return undefined;
    asserts.push({ negate, re2 });
  }
  if (rest === undefined) return undefined;
  return (value) => asserts.every(({ negate, re2 }) => re2.matcher(value).find() !== negate) && rest.matcher(value).find();
}

/** One pattern on RE2 when RE2 reads it (whole, or split after its leading lookaheads), else on the built-in engine. */
function linear(pattern: string, flags: string): { test(value: string): boolean; toString(): string } {
  // Compiled by the built-in engine first, whichever runs it: a pattern is JSON Schema's (ECMA-262) or refused,
  // never one only RE2 reads (`(?i)`, `\z`, `[[:alpha:]]`).
  const native = new RegExp(pattern, flags);
  // `toString` is how ajv keys the patterns a schema uses: every engine object must tell its pattern (one that
  // does not shares the first one's).
  const name = `re2:/${pattern}/${flags}`;
  const re2 = onRe2(pattern);
  // `find`: JSON Schema patterns are unanchored, as RegExp.test is.
  if (re2 !== undefined) return { test: (value) => re2.matcher(value).find(), toString: () => name };
  const split = splitOnRe2(pattern);
  if (split !== undefined) return { test: split, toString: () => name };
  return { test: (value) => boundedTest(pattern, flags, value), toString: () => native.toString() };
}

/**
 * The regular-expression engine of every schema's `pattern` (and
 * `patternProperties`, `propertyNames`), given to ajv as `code.regExp`.
 *
 * The built-in engine backtracks: a pattern such as `^(a+)+$`, common in
 * hand-written schemas, takes it exponential time on a 30-character argument
 * (0.3 s at 26, years at 60), and the dispatcher checks arguments on its
 * event loop — one call would stop every other. A tool's schema is not the
 * caller's to choose, but an MCP server's list is untrusted and an argument is
 * anyone's. RE2 (here re2js, a pure-JavaScript port) matches in time linear
 * in the input, whatever the pattern.
 *
 * RE2 does not read lookaround, backreferences or Unicode property names
 * longer than their short forms (`\p{Letter}`). Lookaheads right after a
 * leading `^` (zod 4's email pattern, password rules) are taken apart into
 * RE2 matches (leading-lookaheads.ts). Any other pattern that uses them still
 * runs, on the built-in engine, so no schema that worked stops working; it
 * runs on a thread of its own for a bounded time (bounded-regexp.ts), so its
 * worst case ends the one validation, not the process (docs/schemas.md).
 *
 * `code` names it in standalone code, which the fleet does not generate.
 */
export const linearRegExp: RegExpEngine = Object.assign(linear, { code: 'linearRegExp' });
