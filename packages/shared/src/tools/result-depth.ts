import { ResourceLimitError } from '../errors/errors.js';

/**
 * Deepest nesting of objects and arrays a result may have; the result object
 * itself is depth 1. A result is written and read as JSON on every hop
 * (worker, Redis, dispatcher, clients), and `JSON.stringify` recurses: here
 * it gives up between 1,000 and 5,000 levels with a RangeError, while
 * `JSON.parse` takes any depth. So a server's answer nested 10,000 deep
 * parses on the worker and then could be written nowhere. 256 levels is far
 * beyond what real results hold, and far below where any hop breaks.
 */
export const MAX_RESULT_DEPTH = 256;

/**
 * Where `value` nests deeper than `maxDepth` (a path such as
 * `structuredContent.a.a[0]`, cut after 200 characters), or undefined when
 * it does not. Walks with a stack of its own, never recursion: its input is
 * the very document that would overflow the call stack, and it stops at the
 * first level too deep, so a hostile document costs no more than a legal one.
 */
export function tooDeepAt(value: unknown, maxDepth: number = MAX_RESULT_DEPTH): string | undefined {
  const stack: { value: unknown; depth: number; path: string }[] = [{ value, depth: 1, path: '' }];
  for (let next = stack.pop(); next !== undefined; next = stack.pop()) {
    const { value: node, depth, path } = next;
    if (typeof node !== 'object' || node === null) continue;
    if (depth > maxDepth) return path.length > 200 ? `${path.slice(0, 200)}…` : path;
    // The path is kept only while it is short: its use is to point at where the nesting starts.
    const at = (part: string): string => (path.length > 200 ? path : `${path}${part}`);
    if (Array.isArray(node)) {
      for (let i = 0; i < node.length; i++) stack.push({ value: node[i], depth: depth + 1, path: at(`[${i}]`) });
    } else {
      for (const key of Object.keys(node)) stack.push({ value: (node as Record<string, unknown>)[key], depth: depth + 1, path: at(path === '' ? key : `.${key}`) });
    }
  }
  return undefined;
}

/** The failure of a result that nests deeper than {@link MAX_RESULT_DEPTH}, `at` where it does ({@link tooDeepAt}). */
export function resultTooDeep(toolName: string, at: string): ResourceLimitError {
  return new ResourceLimitError(toolName, 'output', `the result nests deeper than ${MAX_RESULT_DEPTH} levels at '${at}'`, { by: 'the worker', remedy: 'return flatter data (a deep document as text, or by reference)' });
}

/** Where in a result the path `at` that {@link tooDeepAt} gave for `part` lies, the part being named `root` (`blocks`, `structuredContent`). */
export function pathIn(root: string, part: unknown, at: string): string {
  return at === '' || Array.isArray(part) ? `${root}${at}` : `${root}.${at}`;
}

/**
 * `value`, the part `root` of a tool's result, as JSON. When JSON.stringify
 * runs out of stack (the value nests thousands deep) the result fails as one
 * nested too deep, naming where ({@link resultTooDeep}); any other failure (a
 * cycle, a BigInt) is thrown as it is.
 */
export function resultPartJson(toolName: string, value: unknown, root: string): string {
  try {
    return JSON.stringify(value);
  } catch (error) {
    const at = error instanceof RangeError ? tooDeepAt(value, MAX_RESULT_DEPTH - 1) : undefined;
    if (at === undefined) throw error;
    throw resultTooDeep(toolName, pathIn(root, value, at));
  }
}
