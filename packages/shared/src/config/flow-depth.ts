/**
 * Where a YAML text first opens a flow collection (`[` or `{`) deeper than
 * `max` levels, or undefined. Looked for before the YAML parser sees the
 * text: the parser descends a flow collection by recursion, so 10,000
 * brackets make it report a stack overflow and 100,000 (a 200 KB file) take
 * the process down, out of memory. Block nesting needs no such guard: each
 * level costs a line of growing indentation, so a file deep enough to hurt
 * the parser is many megabytes, and the parser reports it.
 *
 * Only brackets where a value may start count (at the start of a line's
 * content, after `: `, `- `, `,`, or another opening bracket), so a plain
 * scalar such as `x[1]` or `^[a-z` opens nothing; quoted scalars and
 * comments are skipped. A closing bracket outside any counted collection is
 * ignored. It over-counts nothing a YAML parser would read as one level.
 */
export function deepFlowAt(text: string, max: number): number | undefined {
  let depth = 0;
  /** Whether a value may start at the next non-blank character. */
  let valueStart = true;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '\n') {
      valueStart = true;
      continue;
    }
    if (c === ' ' || c === '\t' || c === '\r') continue;
    if (c === '#' && (i === 0 || /\s/.test(text[i - 1] ?? ''))) {
      const end = text.indexOf('\n', i);
      if (end === -1) return undefined;
      i = end - 1;
      continue;
    }
    if (valueStart && (c === '"' || c === "'")) {
      i = endOfQuoted(text, i);
      valueStart = false;
      continue;
    }
    if (valueStart && (c === '[' || c === '{')) {
      depth += 1;
      if (depth > max) return i;
      continue;
    }
    if ((c === ']' || c === '}') && depth > 0) {
      depth -= 1;
      valueStart = false;
      continue;
    }
    if (c === ',' && depth > 0) {
      valueStart = true;
      continue;
    }
    if ((c === ':' || c === '-' || c === '?') && /\s/.test(text[i + 1] ?? ' ')) {
      valueStart = true;
      continue;
    }
    valueStart = false;
  }
  return undefined;
}

/** The index of the quote that ends the scalar quoted at `start` (`''` and `\"` are not ends), or the text's last index. */
function endOfQuoted(text: string, start: number): number {
  const quote = text[start];
  for (let i = start + 1; i < text.length; i++) {
    const c = text[i];
    if (quote === '"' && c === '\\') {
      i += 1;
      continue;
    }
    if (c !== quote) continue;
    if (quote === "'" && text[i + 1] === "'") {
      i += 1;
      continue;
    }
    return i;
  }
  return text.length - 1;
}
