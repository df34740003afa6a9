import { z } from 'zod';
import { describe, expect, it } from 'vitest';
import { problemAt, schemaProblems } from './file-problems.js';
import { parseConfigSource } from './yaml-source.js';

const Policy = z.strictObject({
  version: z.literal(1),
  approval: z.strictObject({ allow: z.array(z.string()).optional(), deadlineMs: z.number().int().positive().optional() }).optional(),
  scopes: z.record(z.string().min(1), z.array(z.string())).default({}),
  env: z.record(z.string().regex(/^[A-Z_]+$/, 'must be capitals and "_"'), z.string()).default({}),
});

/** The problems of `text`, read from `name`, checked against the schema above. */
function problems(name: string, text: string): string[] {
  const source = parseConfigSource(name, text, 'test file');
  const parsed = Policy.safeParse(source.value);
  return parsed.success ? [] : schemaProblems(Policy, parsed.error.issues, source);
}

describe('schemaProblems', () => {
  it('says each problem at its file:line:col and path, with what to change', () => {
    expect(problems('p.yaml', 'version: 2\napproval:\n  deadlineMs: -5\n')).toEqual([
      'p.yaml:1:10: version: Invalid input: expected 1; write 1',
      'p.yaml:3:15: approval.deadlineMs: Too small: expected number to be >0; write more than 0',
    ]);
    expect(problems('p.yaml', 'version: 1\nscopes: [a]\n')).toEqual(['p.yaml:2:9: scopes: Invalid input: expected record, received array; write a map (key: value) here']);
  });

  it('points an unknown key at the key, and suggests only fields of the object it is in', () => {
    expect(problems('p.yaml', 'version: 1\nalow: [x]\n')).toEqual(['p.yaml:2:1: (root): Unrecognized key: "alow"; remove "alow": it is not a field here']);
    expect(problems('p.yaml', 'version: 1\napproval:\n  alow: [x]\n')).toEqual(['p.yaml:3:3: approval: Unrecognized key: "alow"; did you mean "allow"?']);
    expect(problems('p.json', '{\n  "version": 1,\n  "approval": { "alow": [] }\n}\n')).toEqual(['p.json:3:17: approval: Unrecognized key: "alow"; did you mean "allow"?']);
  });

  it('reads a key run into its value ("{allow:[]}" is the one key "allow:[]" in YAML) as a missing space', () => {
    expect(problems('p.yaml', 'version: 1\napproval: {deadlineMs:5}\n')).toEqual(['p.yaml:2:12: approval: Unrecognized key: "deadlineMs:5"; write "deadlineMs: 5", with a space after ":"']);
  });

  it('says what is wrong with a key at the key, in the words of its own check', () => {
    expect(problems('p.yaml', 'version: 1\nscopes: { "": [a] }\n')).toEqual(['p.yaml:2:11: scopes."": key: Too small: expected string to have >=1 characters; write at least 1 character']);
    expect(problems('p.yaml', 'version: 1\nenv: { lower: x }\n')).toEqual(['p.yaml:2:8: env.lower: key must be capitals and "_"']);
  });
});

describe('problemAt', () => {
  it('names file:line:col, then the dotted path, then the message', () => {
    const source = parseConfigSource('p.yaml', 'version: 1\nscopes:\n  r: [a]\n', 'test file');
    expect(problemAt(source, ['scopes', 'r', 0], 'no such tool; remove it')).toBe('p.yaml:3:7: scopes.r.0: no such tool; remove it');
    expect(problemAt(source, ['scopes', 'r'], 'bad name', { key: true })).toBe('p.yaml:3:3: scopes.r: bad name');
    expect(problemAt(source, [], 'empty')).toBe('p.yaml:1:1: (root): empty');
  });
});
