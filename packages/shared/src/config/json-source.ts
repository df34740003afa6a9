import { ConfigInvalidError } from '../errors/errors.js';

/**
 * Deepest nesting a `.json` configuration file may have. Real files nest a
 * handful of levels; the bound keeps a hostile or broken file to an error
 * that names its place instead of a stack overflow.
 */
export const MAX_JSON_DEPTH = 128;

/** What every syntax error of a `.json` file adds, so the reader knows which rules apply and how out. */
const STRICT_HINT = 'a .json file is read as strict JSON (no comments, trailing commas, single quotes or unquoted keys): fix it there, or rename the file .yaml to write YAML';

/** Where a parsed node starts in the text, and, for an object or array, where each child's key and value start. */
interface Node {
  readonly start: number;
  readonly children: Map<string | number, { readonly keyStart: number | undefined; readonly node: Node }> | undefined;
}

/** A parsed `.json` document with the position of each of its parts (the shape of `YamlSource`, see yaml-source.ts). */
export interface JsonSource {
  readonly value: unknown;
  where(path: readonly PropertyKey[], options?: { readonly key?: boolean }): string;
}

/**
 * Parses `text`, read from `file`, as strict JSON (RFC 8259), keeping node
 * positions. Not `JSON.parse`: it keeps the last of two equal keys without a
 * word and names no line; here a duplicate key is refused, like the YAML
 * reader refuses one, and every error names `file:line:col`. Only
 * whitespace is read as the empty document (`null`), so a loader can say what
 * the file needs.
 * @throws ConfigInvalidError (`invalid <what>: file:line:col: …`) for the first syntax error, a duplicate key,
 *   or nesting deeper than {@link MAX_JSON_DEPTH}.
 */
export function parseJsonSource(file: string, text: string, what: string): JsonSource {
  // A byte-order mark is not JSON, but editors write one and RFC 8259 lets a reader skip it.
  const bom = text.startsWith('\uFEFF') ? 1 : 0;
  const lineStarts = [0];
  for (let i = 0; i < text.length; i++) if (text[i] === '\n') lineStarts.push(i + 1);
  const at = (offset: number): string => {
    let line = lineStarts.length - 1;
    while (lineStarts[line]! > offset) line--;
    return `${file}:${line + 1}:${offset - lineStarts[line]! + 1}`;
  };
  const parser = new StrictJsonParser(text, bom);
  let parsed: { value: unknown; node: Node | undefined };
  try {
    parsed = parser.document();
  } catch (error) {
    if (!(error instanceof JsonSyntaxError)) throw error;
    throw new ConfigInvalidError(what, [`${at(error.offset)}: ${error.message}; ${error.hint ?? STRICT_HINT}`]);
  }
  const root = parsed.node;
  const nodeAt = (path: readonly PropertyKey[]): Node | undefined => {
    let node = root;
    for (const step of path) node = node?.children?.get(typeof step === 'number' ? step : String(step))?.node;
    return node;
  };
  return {
    value: parsed.value,
    where(path, options = {}) {
      if (options.key === true && path.length > 0) {
        const last = path[path.length - 1]!;
        const keyStart = nodeAt(path.slice(0, -1))?.children?.get(String(last))?.keyStart;
        if (keyStart !== undefined) return at(keyStart);
      }
      for (let depth = path.length; depth >= 0; depth--) {
        const node = nodeAt(path.slice(0, depth));
        if (node !== undefined) return at(node.start);
      }
      return file;
    },
  };
}

class JsonSyntaxError extends Error {
  constructor(
    message: string,
    readonly offset: number,
    /** Replaces the general hint when the error is not about JSON's syntax. */
    readonly hint?: string,
  ) {
    super(message);
  }
}

const WHITESPACE = new Set([' ', '\t', '\n', '\r']);
const ESCAPES: Readonly<Record<string, string>> = { '"': '"', '\\': '\\', '/': '/', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' };
const NUMBER = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;

/** Recursive descent over RFC 8259's grammar; recursion is bounded by {@link MAX_JSON_DEPTH}. */
class StrictJsonParser {
  private pos: number;

  constructor(
    private readonly text: string,
    start: number,
  ) {
    this.pos = start;
  }

  document(): { value: unknown; node: Node | undefined } {
    this.skipWhitespace();
    if (this.pos >= this.text.length) return { value: null, node: undefined };
    const parsed = this.value(0);
    this.skipWhitespace();
    if (this.pos < this.text.length) {
      throw new JsonSyntaxError(`unexpected ${this.describe()} after the document's end (a JSON file holds one value)`, this.pos, 'keep one: remove what follows the first value, or merge it into the first');
    }
    return parsed;
  }

  private value(depth: number): { value: unknown; node: Node } {
    const start = this.pos;
    const c = this.text[this.pos];
    if (c === '{' || c === '[') {
      if (depth >= MAX_JSON_DEPTH) throw new JsonSyntaxError(`nested deeper than ${MAX_JSON_DEPTH} levels`, start, 'flatten the file');
      return c === '{' ? this.object(depth + 1) : this.array(depth + 1);
    }
    if (c === '"') return { value: this.string(), node: { start, children: undefined } };
    for (const [word, value] of [['true', true], ['false', false], ['null', null]] as const) {
      if (this.text.startsWith(word, this.pos)) {
        this.pos += word.length;
        return { value, node: { start, children: undefined } };
      }
    }
    NUMBER.lastIndex = this.pos;
    const number = NUMBER.exec(this.text);
    if (number !== null) {
      this.pos += number[0].length;
      return { value: Number(number[0]), node: { start, children: undefined } };
    }
    throw this.error(`expected a value (an object, array, "string", number, true, false or null), found ${this.describe()}`);
  }

  private object(depth: number): { value: unknown; node: Node } {
    const start = this.pos++;
    const value: Record<string, unknown> = {};
    const children: NonNullable<Node['children']> = new Map();
    this.skipWhitespace();
    if (this.text[this.pos] === '}') {
      this.pos++;
      return { value, node: { start, children } };
    }
    for (let first = true; ; first = false) {
      this.skipWhitespace();
      const keyStart = this.pos;
      if (!first && this.text[this.pos] === '}') throw this.error('a trailing comma before "}": remove it');
      if (this.text[this.pos] !== '"') throw this.error(`expected a "double-quoted" key, found ${this.describe()}`);
      const key = this.string();
      if (children.has(key)) throw new JsonSyntaxError(`key ${JSON.stringify(key)} appears twice in one object`, keyStart, 'keys must be unique: remove or rename one');
      this.skipWhitespace();
      if (this.text[this.pos] !== ':') throw this.error(`expected ":" after the key ${JSON.stringify(key)}, found ${this.describe()}`);
      this.pos++;
      this.skipWhitespace();
      const child = this.value(depth);
      // Defined, not assigned: `__proto__` stays an own key (as with JSON.parse) for the loaders to refuse by name.
      Object.defineProperty(value, key, { value: child.value, enumerable: true, writable: true, configurable: true });
      children.set(key, { keyStart, node: child.node });
      this.skipWhitespace();
      const next = this.text[this.pos];
      this.pos++;
      if (next === '}') return { value, node: { start, children } };
      if (next !== ',') {
        this.pos--;
        throw this.error(`expected "," or "}" after the value of ${JSON.stringify(key)}, found ${this.describe()}`);
      }
    }
  }

  private array(depth: number): { value: unknown; node: Node } {
    const start = this.pos++;
    const value: unknown[] = [];
    const children: NonNullable<Node['children']> = new Map();
    this.skipWhitespace();
    if (this.text[this.pos] === ']') {
      this.pos++;
      return { value, node: { start, children } };
    }
    for (let first = true; ; first = false) {
      this.skipWhitespace();
      if (!first && this.text[this.pos] === ']') throw this.error('a trailing comma before "]": remove it');
      const child = this.value(depth);
      children.set(value.length, { keyStart: undefined, node: child.node });
      value.push(child.value);
      this.skipWhitespace();
      const next = this.text[this.pos];
      this.pos++;
      if (next === ']') return { value, node: { start, children } };
      if (next !== ',') {
        this.pos--;
        throw this.error(`expected "," or "]" after an array item, found ${this.describe()}`);
      }
    }
  }

  private string(): string {
    const open = this.pos++;
    let out = '';
    for (;;) {
      const c = this.text[this.pos];
      if (c === undefined) throw new JsonSyntaxError('a string is not closed (no ending ")', open, 'close it with "');
      if (c === '"') {
        this.pos++;
        return out;
      }
      if (c < ' ') throw this.error(`a control character (U+${c.charCodeAt(0).toString(16).toUpperCase().padStart(4, '0')}) in a string; write it as an escape (\\n, \\t, \\u00XX)`);
      if (c !== '\\') {
        out += c;
        this.pos++;
        continue;
      }
      const e = this.text[this.pos + 1];
      if (e === 'u') {
        const hex = this.text.slice(this.pos + 2, this.pos + 6);
        if (!/^[0-9a-fA-F]{4}$/.test(hex)) throw this.error('"\\u" must be followed by four hex digits');
        out += String.fromCharCode(parseInt(hex, 16));
        this.pos += 6;
      } else if (e !== undefined && Object.hasOwn(ESCAPES, e)) {
        out += ESCAPES[e];
        this.pos += 2;
      } else {
        throw this.error(`"\\${e ?? ''}" is not a JSON escape (\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)`);
      }
    }
  }

  private skipWhitespace(): void {
    while (this.pos < this.text.length && WHITESPACE.has(this.text[this.pos]!)) this.pos++;
  }

  /** The text at the current position, as an error shows it. */
  private describe(): string {
    if (this.pos >= this.text.length) return 'the end of the file';
    const c = this.text[this.pos]!;
    if (c === '/' && (this.text[this.pos + 1] === '/' || this.text[this.pos + 1] === '*')) return 'a comment';
    return `"${this.text.slice(this.pos, this.pos + 10).replace(/\s[\s\S]*$/, '') || c}"`;
  }

  private error(message: string): JsonSyntaxError {
    return new JsonSyntaxError(message, this.pos);
  }
}
