import { describe, expect, it } from 'vitest';
import { parseYamlSource } from './yaml-source.js';

/** The problems `text` is refused with, one a line. */
function refusal(text: string): string[] {
  try {
    parseYamlSource('f.yaml', text, 'test file');
  } catch (error) {
    expect(error).toMatchObject({ code: 'CONFIG_INVALID' });
    return (error as { details: { problems: string[] } }).details.problems;
  }
  throw new Error(`${JSON.stringify(text)} parsed, but a refusal was expected`);
}

describe('YAML sources', () => {
  it('refuse a second document in words of the file, not of the parser (QA: "please use YAML.parseAllDocuments()")', () => {
    const two = refusal('version: 1\nservers: {}\n---\nversion: 1\n');
    expect(two).toEqual(['f.yaml:3:1: the file holds more than one YAML document, a second one starting here; keep one: remove this "---" line and the document after it, or merge that document into the first']);
    // A lone "---" at the end starts an empty second document: the same fix.
    expect(refusal('a: 1\n---\n')).toEqual([expect.stringMatching(/^f\.yaml:2:1: the file holds more than one YAML document.*remove this "---" line/) as string]);
    // After an end marker ("...") the second document has no "---" to point at.
    expect(refusal('a: 1\n...\nb: 2\n')).toEqual(['f.yaml:3:1: the file holds more than one YAML document, a second one starting here; keep one: remove the document from here on, or merge it into the first']);
    for (const problem of [...two, ...refusal('a: 1\n...\nb: 2\n')]) expect(problem).not.toMatch(/parseAllDocuments|YAML\.|please use/);
    // One document with its optional "---" first is one document.
    expect(parseYamlSource('f.yaml', '---\na: 1\n', 'test file').value).toEqual({ a: 1 });
  });

  it('add what to change to each syntax error', () => {
    const cases: [string, string][] = [
      ['a:\n\tb: 1\n', 'f.yaml:2:1: Tabs are not allowed as indentation; indent with spaces'],
      ['a:\n  b: 1\n c: 2\n', 'f.yaml:3:1: All mapping items must start at the same column; indent with spaces so that the keys of one map (or the "- " items of one list) start at the same column, deeper than the key they belong to'],
      ['a: { b: 1\n', 'f.yaml:2:1: Flow map in block collection must be sufficiently indented and end with a }; close it with "}", and indent its lines deeper than its key'],
      ['a: [1, 2\n', 'f.yaml:2:1: Flow sequence in block collection must be sufficiently indented and end with a ]; close it with "]", and indent its lines deeper than its key'],
      ['a: "x\n', 'f.yaml:2:1: Missing closing "quote; close the string opened with " before this point'],
      ["a: 'x\n", "f.yaml:2:1: Missing closing 'quote; close the string opened with ' before this point"],
      ['a: 1\nb\nc: 2\n', 'f.yaml:2:1: Implicit map keys need to be followed by map values; write "key: value" (a ":" and a space after the key), or "- item" for an item of a list'],
      ['a: 1\nb: 2\na: 3\n', 'f.yaml:3:1: key "a" appears twice in one map; keys must be unique: remove or rename one'],
      ['"a b": 1\n"a b": 2\n', 'f.yaml:2:1: key "a b" appears twice in one map; keys must be unique: remove or rename one'],
      ['a: "x\\q"\n', 'f.yaml:1:6: Invalid escape sequence \\q; in "double quotes" a backslash starts an escape (\\n, \\t, \\", \\\\): write \\\\ for a backslash, or use single quotes'],
      ['a: !!set\n  b: 1\n', 'f.yaml:1:4: Set items must all have null values; remove the tag (!!set, !!map…): a configuration file needs none'],
      ['a: @x\n', 'f.yaml:1:4: Plain value cannot start with reserved character @; quote the value'],
      ['a: { b: 1,, c: 2 }\n', 'f.yaml:1:11: Unexpected , in flow map; remove it, or quote the whole value it belongs to'],
      ['a: 1\n}\n', 'f.yaml:2:1: unexpected "}"; remove it, or quote the whole value it belongs to'],
      ['a: "x" y\n', 'f.yaml:1:8: unexpected text after a value; remove it, or quote the whole value it belongs to'],
      ['a: "x"#c\n', 'f.yaml:1:7: Comments must be separated from other tokens by white space characters; add a space there'],
      ['a: b: c\n', 'f.yaml:1:4: Nested mappings are not allowed in compact mappings; put a nested map on the lines below its key, indented, or write it as { key: value }'],
      ['a: 1\nb c\n d: 2\n', 'f.yaml:2:1: Implicit keys need to be on a single line; write each key and its ":" on one line (a line above without ":", or with an unclosed quote, can cause this)'],
    ];
    for (const [text, problem] of cases) expect(refusal(text), text).toContain(problem);
  });

  it('say each syntax error once, however often the parser finds it at the same place (QA: an unclosed `{` was told three times)', () => {
    const problems = refusal('{{{{\n');
    expect(problems.length).toBeGreaterThan(0);
    expect(new Set(problems).size).toBe(problems.length);
  });

  it('refuse an alias of no anchor as such, not as an alias bomb', () => {
    expect(refusal('a: 1\nb: *nope\n')).toEqual(['f.yaml:2:4: the alias *nope names no anchor before it; put &nope on a value above it, or write the value out']);
  });

  it('refuse a list or map as a key, which a JavaScript object would turn into text', () => {
    expect(refusal('a: 1\n? [x, y]\n: 2\n')).toEqual(['f.yaml:2:3: a key must be a name, not a list or map; write it as a plain name']);
  });
});
