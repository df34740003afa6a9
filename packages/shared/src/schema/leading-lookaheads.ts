/**
 * A pattern of the form `^(?=A)(?!B)…R`: lookaheads right after the start
 * anchor, then the rest. The commonest use of lookaround in schemas has this
 * form — zod 4's email pattern (`^(?!\.)(?!.*\.\.)…`), password rules
 * (`^(?=.*[A-Z])(?=.*\d).{8,}$`) — and it needs no lookaround to run:
 * without the `m` flag `^` holds only at the start, so each assertion is a
 * match of its own from the start, and the pattern matches exactly when
 * every `(?=A)` matches `^(?:A)`, no `(?!B)` matches `^(?:B)`, and
 * `^(?:R)` matches. Each part may then run on RE2 (linear-regexp.ts).
 */
export interface LeadingLookaheads {
  readonly asserts: readonly { readonly negate: boolean; readonly body: string }[];
  readonly rest: string;
}

/**
 * Walks `pattern` from `from`, calling `at` with each character's index and
 * group depth outside classes and escapes; stops when `at` answers true and
 * returns that index, else -1.
 */
function scan(pattern: string, from: number, at: (i: number, depth: number) => boolean): number {
  let depth = 0;
  let inClass = false;
  for (let i = from; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === '\\') {
      i += 1;
      continue;
    }
    if (inClass) {
      if (c === ']') inClass = false;
      continue;
    }
    if (c === '[') inClass = true;
    else if (c === '(') depth += 1;
    else if (c === ')') depth -= 1;
    if (at(i, depth)) return i;
  }
  return -1;
}

/** The leading lookaheads of `pattern` and its rest, or undefined when it does not have that form. */
export function leadingLookaheads(pattern: string): LeadingLookaheads | undefined {
  if (!pattern.startsWith('^')) return undefined;
  // `^(?!a)b|c` is `(^(?!a)b)|c`: an alternative at the top reaches past the anchor.
  if (scan(pattern, 0, (i, depth) => depth === 0 && pattern[i] === '|') >= 0) return undefined;
  const asserts: { negate: boolean; body: string }[] = [];
  let next = 1;
  while (pattern.startsWith('(?=', next) || pattern.startsWith('(?!', next)) {
    const close = scan(pattern, next, (i, depth) => depth === 0 && pattern[i] === ')');
    if (close < 0) return undefined;
    asserts.push({ negate: pattern[next + 2] === '!', body: pattern.slice(next + 3, close) });
    next = close + 1;
  }
  // A quantified assertion is not ECMA-262 with the `u` flag; the built-in engine refuses it first.
  if (asserts.length === 0 || /^[*+?{]/.test(pattern.slice(next))) return undefined;
  return { asserts, rest: pattern.slice(next) };
}
