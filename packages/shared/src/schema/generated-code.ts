/**
 * Finds the checks in the code ajv generates for a schema (one validator
 * function's source), so the fleet can meter each one it runs
 * (validation-fuel.ts).
 *
 * The source is ajv's own output, not anyone's JavaScript: blocks always have
 * braces, strings are double-quoted (JSON), the only regular-expression
 * literals are the `/~/g` and `/\//g` of a JSON Pointer escape (any other
 * slash divides, for `multipleOf`), and the only
 * comment is a `/*# sourceURL … *\/`. Every keyword ajv checks is an `if(` of
 * that code (a string that holds `if(`, such as a property's name, is not).
 * Anything else (a backtick, an unclosed string or brace, a loop other than
 * `for`) is an ajv this code does not know, and {@link scanGenerated} throws rather
 * than let code run unmetered.
 */

const isIdentifierChar = (c: string | undefined): boolean => c !== undefined && /[\w$]/.test(c);

/**
 * Whether the `/` at `i` opens a regular-expression literal rather than
 * divides (ajv's `multipleOf` divides): it does after an operator or an
 * opening bracket, not after a name, a number or a closing bracket.
 */
function opensRegExp(source: string, i: number): boolean {
  let j = i - 1;
  while (j >= 0 && /\s/.test(source[j] ?? '')) j--;
  const before = source[j];
  return before === undefined || !(isIdentifierChar(before) || before === ')' || before === ']');
}

/** The offset just past the string, comment or regular expression starting at `i`, or `i` when none starts there. */
function skipLiteral(source: string, i: number): number {
  const c = source[i];
  if (c === '"' || c === "'") {
    for (let j = i + 1; j < source.length; j++) {
      if (source[j] === '\\') j++;
      else if (source[j] === c) return j + 1;
    }
    throw new Error('unclosed string');
  }
  if (c === '/' && source[i + 1] === '*') {
    const end = source.indexOf('*/', i + 2);
    if (end < 0) throw new Error('unclosed comment');
    return end + 2;
  }
  if (c === '/' && opensRegExp(source, i)) {
    for (let j = i + 1; j < source.length; j++) {
      if (source[j] === '\\') j++;
      else if (source[j] === '/') return j + 1;
      else if (source[j] === '\n') break;
    }
    throw new Error('unclosed regular expression');
  }
  if (c === '`') throw new Error('a template literal');
  return i;
}

/** Where, in a generated function's source, its checks, loops, returns and problems are. */
export interface GeneratedCode {
  /** The offset of each `if(` of the code. */
  readonly checks: readonly number[];
  /** The offset of the `{` that opens each `for` loop's block. */
  readonly loops: readonly number[];
  /** The offset of each `return` of the code. */
  readonly returns: readonly number[];
  /** The offset just past each `errors++;`, with which ajv counts a problem it made (lib/compile/errors.ts). */
  readonly problems: readonly number[];
}

/**
 * The checks, loops, returns and problems of the code of `source` from `from` on (the
 * `{` of the function's body, so that every brace scanned closes within it),
 * each in source order; strings, comments and regular expressions are skipped.
 *
 * @throws Error when the source is not shaped as ajv writes it (see above).
 */
export function scanGenerated(source: string, from = 0): GeneratedCode {
  const checks: number[] = [];
  const loops: number[] = [];
  const returns: number[] = [];
  const problems: number[] = [];
  let depth = 0;
  let i = from;
  while (i < source.length) {
    const past = skipLiteral(source, i);
    if (past !== i) {
      i = past;
      continue;
    }
    const c = source[i];
    const word = !isIdentifierChar(source[i - 1]);
    if (word && c === 'i' && source.startsWith('if(', i)) checks.push(i);
    else if (word && c === 'e' && source.startsWith('errors++;', i)) problems.push(i + 'errors++;'.length);
    else if (word && c === 'r' && source.startsWith('return', i) && !isIdentifierChar(source[i + 6])) returns.push(i);
    else if (word && c === 'f' && source.startsWith('for(', i)) {
      // The header holds no braces or literals in ajv's loops (`for(const key0 in data)`, `for(let i0=0; …)`).
      let parens = 0;
      let j = i + 3;
      for (; j < source.length; j++) {
        if (source[j] === '(') parens++;
        else if (source[j] === ')' && --parens === 0) break;
      }
      if (source[j + 1] !== '{') throw new Error('a loop without a block');
      loops.push(j + 1);
      i = j + 1;
      continue;
    } else if (word && ((c === 'w' && source.startsWith('while', i) && !isIdentifierChar(source[i + 5])) || (c === 'd' && source.startsWith('do{', i)))) {
      throw new Error('a loop other than for');
    } else if (c === '{') depth++;
    else if (c === '}' && --depth < 0) throw new Error('an unmatched }');
    i++;
  }
  if (depth !== 0) throw new Error('an unclosed {');
  return { checks, loops, returns, problems };
}
