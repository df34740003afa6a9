import { InvalidDefinitionError } from '../errors/errors.js';

const EXACT = /^[A-Za-z0-9_.-]{1,128}$/;
const PREFIX = /^[A-Za-z0-9_.-]{0,126}\.\*$/;

/**
 * Checks one tool pattern: an exact tool name, `prefix.*` (every tool whose
 * name starts with `prefix.`), or `*` (every tool).
 *
 * @throws InvalidDefinitionError naming the pattern when it is none of these.
 */
export function assertToolPattern(pattern: string): void {
  if (pattern === '*' || PREFIX.test(pattern) || (EXACT.test(pattern) && !pattern.includes('*'))) return;
  throw new InvalidDefinitionError({
    toolName: undefined,
    path: '',
    reason: `tool pattern ${JSON.stringify(pattern)} is not an exact tool name, "prefix.*" or "*"`,
  });
}

/** Compiles patterns to one predicate; exact names are a set lookup, prefixes a short scan. */
export function toolMatcher(patterns: Iterable<string>): (toolName: string) => boolean {
  const exact = new Set<string>();
  const prefixes: string[] = [];
  let all = false;
  for (const p of patterns) {
    assertToolPattern(p);
    if (p === '*') all = true;
    else if (p.endsWith('.*')) prefixes.push(p.slice(0, -1));
    else exact.add(p);
  }
  if (all) return () => true;
  return (name) => exact.has(name) || prefixes.some((prefix) => name.startsWith(prefix));
}

/**
 * The set of tools a task may see and call. `ToolScope.full()` admits every
 * tool; `ToolScope.allow([...])` admits exact names and `prefix.*` patterns.
 * Scopes are values: immutable, shareable between concurrent calls.
 */
export class ToolScope {
  static readonly #FULL = new ToolScope(null);
  readonly #admits: (toolName: string) => boolean;
  /** The patterns this scope admits, or `null` for the full scope. */
  readonly patterns: readonly string[] | null;

  private constructor(patterns: readonly string[] | null) {
    this.patterns = patterns === null ? null : Object.freeze([...patterns]);
    this.#admits = patterns === null ? () => true : toolMatcher(patterns);
    Object.freeze(this);
  }

  /** The identity scope: admits every tool. */
  static full(): ToolScope {
    return ToolScope.#FULL;
  }

  /**
   * A scope that admits only the given tools.
   * @throws InvalidDefinitionError for a pattern that is not a name, `prefix.*` or `*`.
   */
  static allow(patterns: Iterable<string>): ToolScope {
    return new ToolScope([...patterns]);
  }

  /** True when this scope admits every tool. */
  get isFull(): boolean {
    return this.patterns === null;
  }

  /** Whether a call to `toolName` is inside this scope. */
  admits(toolName: string): boolean {
    return this.#admits(toolName);
  }

  /** The items whose `name` this scope admits, order kept. */
  filter<T extends { readonly name: string }>(items: readonly T[]): T[] {
    return items.filter((item) => this.#admits(item.name));
  }

  toJSON(): { patterns: readonly string[] | null } {
    return { patterns: this.patterns };
  }
}
