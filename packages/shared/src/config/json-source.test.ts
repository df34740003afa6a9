import { describe, expect, it } from 'vitest';
import { MAX_JSON_DEPTH, parseJsonSource } from './json-source.js';
import { parseConfigSource } from './yaml-source.js';

const parse = (text: string) => parseJsonSource('f.json', text, 'test file');
/** The message `text` is refused with. */
function refusal(text: string): string {
  try {
    parse(text);
  } catch (error) {
    expect(error).toMatchObject({ code: 'CONFIG_INVALID' });
    return (error as Error).message;
  }
  throw new Error(`${JSON.stringify(text)} parsed, but a refusal was expected`);
}

describe('strict JSON sources', () => {
  it('read what JSON.parse reads, to the same values', () => {
    for (const text of ['{}', '[]', '0', '-1.5e+3', '"x"', 'true', 'null', ' \t\r\n{"a": [1, {"b": null}], "c": "\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\ud83d\\ude00"} ', '[0.5, -0, 1E2, 12345678901234567890]']) {
      expect(parse(text).value).toEqual(JSON.parse(text));
    }
    // A byte-order mark is skipped; only whitespace is the empty document (null), for the loader to explain.
    expect(parse('\uFEFF{"a": 1}').value).toEqual({ a: 1 });
    expect(parse(' \n').value).toBeNull();
  });

  it('refuse what only YAML (or JavaScript) allows, naming line and column', () => {
    const cases: [string, RegExp][] = [
      ['{"a": 1,}', /f\.json:1:9: a trailing comma before "}": remove it; a \.json file is read as strict JSON/],
      ['[1,\n 2,\n]', /f\.json:3:1: a trailing comma before "]": remove it/],
      ['{a: 1}', /f\.json:1:2: expected a "double-quoted" key, found "a:"/],
      ["{'a': 1}", /f\.json:1:2: expected a "double-quoted" key/],
      ['{"a": 1 /* c */}', /f\.json:1:9: expected "," or "}" after the value of "a", found a comment/],
      ['# c\n{}', /f\.json:1:1: expected a value .*found "#"/],
      ['a: 1', /f\.json:1:1: expected a value/],
      ['{"a": yes}', /f\.json:1:7: expected a value/],
      ['[01]', /f\.json:1:3: expected "," or "]" after an array item/],
      ['[.5, +1]', /f\.json:1:2: expected a value/],
      ['[NaN]', /f\.json:1:2: expected a value/],
      ['{"a": 1} {"b": 2}', /f\.json:1:10: unexpected "{"b":" after the document's end \(a JSON file holds one value\); keep one: remove what follows the first value, or merge it into the first$/],
      ['{"a": "x', /f\.json:1:7: a string is not closed \(no ending "\); close it with "/],
      ['["a\tb"]', /f\.json:1:4: a control character \(U\+0009\) in a string/],
      ['["\\x41"]', /f\.json:1:3: "\\x" is not a JSON escape/],
      ['["\\u12g4"]', /f\.json:1:3: "\\u" must be followed by four hex digits/],
      ['{"a" 1}', /f\.json:1:6: expected ":" after the key "a"/],
      ['{"a": 1', /f\.json:1:8: expected "," or "}" after the value of "a", found the end of the file/],
      ['{"a": &x 1}', /f\.json:1:7: expected a value/],
    ];
    for (const [text, expected] of cases) expect(refusal(text), text).toMatch(expected);
  });

  it('refuse a duplicate key where JSON.parse keeps the last, and nesting past the bound', () => {
    expect(refusal('{\n  "a": {"x": 1},\n  "b": 2,\n  "a": {}\n}')).toMatch(/f\.json:4:3: key "a" appears twice in one object; keys must be unique: remove or rename one/);
    // Equal once unescaped is equal.
    expect(refusal('{"a": 1, "\\u0061": 2}')).toMatch(/f\.json:1:10: key "a" appears twice/);
    // The same key in different objects is fine.
    expect(parse('{"a": {"a": 1}, "b": {"a": 2}}').value).toEqual({ a: { a: 1 }, b: { a: 2 } });
    const nest = (n: number): string => '['.repeat(n) + ']'.repeat(n);
    expect(parse(nest(MAX_JSON_DEPTH)).value).toBeInstanceOf(Array);
    expect(refusal(nest(MAX_JSON_DEPTH + 1))).toMatch(new RegExp(`f\\.json:1:${MAX_JSON_DEPTH + 1}: nested deeper than ${MAX_JSON_DEPTH} levels; flatten the file`));
    expect(refusal(nest(100_000))).toMatch(/nested deeper than/);
  });

  it('keep `__proto__` as an own key and say where each part is', () => {
    const source = parse('{\n  "servers": {\n    "a": { "args": ["x", 2] },\n    "__proto__": {}\n  }\n}');
    expect(Object.getOwnPropertyNames((source.value as { servers: object }).servers)).toEqual(['a', '__proto__']);
    expect(source.where(['servers', 'a', 'args', 1])).toBe('f.json:3:26');
    expect(source.where(['servers', 'a', 'args'], { key: true })).toBe('f.json:3:12');
    expect(source.where(['servers', 'a', 'missing', 'deeper'])).toBe('f.json:3:10');
    expect(source.where([])).toBe('f.json:1:1');
    expect(parse('').where(['x'])).toBe('f.json');
    // Through the loaders' entry point, such a key is refused at its place; a .json name picks strict JSON, any other YAML.
    expect(() => parseConfigSource('f.json', '{"a": {"__proto__": 1}}', 'test file')).toThrow(/f\.json:1:8: a\.__proto__: `__proto__` cannot be a name/);
    expect(parseConfigSource('f.yaml', '{"a": 1,}', 'test file').value).toEqual({ a: 1 });
    expect(() => parseConfigSource('F.Json', '{"a": 1,}', 'test file')).toThrow(/F\.Json:1:9: a trailing comma/);
  });
});
