import { z } from 'zod';
import { describe, expect, it } from 'vitest';
import { fieldNamesAt, issueFix } from './issue-fix.js';

const Inner = z.strictObject({ min: z.number().int().min(0).optional(), max: z.number().positive().max(256).optional() });
const File = z.strictObject({
  version: z.literal(1),
  servers: z.record(
    z.string(),
    z.strictObject({
      instances: Inner.optional(),
      session: z.enum(['shared', 'perCaller']).optional(),
      callsPerInstance: z.number().default(8),
      command: z.string().min(1).optional(),
      args: z.array(z.string()).max(2).default([]),
      retryable: z.boolean().optional(),
      env: z.record(z.string(), z.union([z.string(), z.strictObject({ fromEnv: z.string() })])).default({}),
    }),
  ),
});
const fixes = (value: unknown): string[] => {
  const parsed = File.safeParse(value);
  return parsed.success ? [] : parsed.error.issues.map((issue) => `${issue.message}${issueFix(issue, File)}`);
};
const server = (fields: Record<string, unknown> | null): unknown => ({ version: 1, servers: { a: fields } });

describe('fieldNamesAt', () => {
  it('reads the fields of the object at a path of the schema, through records, wrappers and unions', () => {
    expect([...fieldNamesAt(File, [])].sort()).toEqual(['servers', 'version']);
    expect([...fieldNamesAt(File, ['servers', 'a'])].sort()).toEqual(['args', 'callsPerInstance', 'command', 'env', 'instances', 'retryable', 'session']);
    expect([...fieldNamesAt(File, ['servers', 'a', 'instances'])].sort()).toEqual(['max', 'min']);
    expect([...fieldNamesAt(File, ['servers', 'a', 'env', 'X'])]).toEqual(['fromEnv']);
    expect([...fieldNamesAt(File, ['servers', 'a', 'nowhere'])]).toEqual([]);
  });
});

describe('issueFix', () => {
  it('names the field an unknown key was likely meant to be, or says to remove it', () => {
    expect(fixes(server({ instance: {} }))).toEqual(['Unrecognized key: "instance"; did you mean "instances"?']);
    expect(fixes(server({ sesion: 'shared', Session: 'x' }))[0]).toBe('Unrecognized keys: "sesion", "Session"; did you mean "session"?; did you mean "session"?');
    expect(fixes(server({ callsPerInstnace: 2 }))).toEqual(['Unrecognized key: "callsPerInstnace"; did you mean "callsPerInstance"?']);
    // Two letters swapped are one slip of the keyboard, in a short name too.
    expect(fixes(server({ sesison: 'shared' }))).toEqual(['Unrecognized key: "sesison"; did you mean "session"?']);
    expect(fixes(server({ color: 'red' }))).toEqual(['Unrecognized key: "color"; remove "color": it is not a field here']);
  });

  it('suggests only a field of the object the key is in (QA: "x" got "max", a server\'s "mix" got "min")', () => {
    expect(fixes({ version: 1, x: 1, servers: {} })).toEqual(['Unrecognized key: "x"; remove "x": it is not a field here']);
    expect(fixes(server({ mix: 2 }))).toEqual(['Unrecognized key: "mix"; remove "mix": it is not a field here']);
    expect(fixes(server({ instances: { mix: 2 } }))).toEqual(['Unrecognized key: "mix"; did you mean "min"?']);
    expect(fixes({ version: 1, servers: {}, server: {} })).toEqual(['Unrecognized key: "server"; did you mean "servers"?']);
  });

  it('suggests only a plausible misspelling: a short key must be close to the field', () => {
    expect(fixes(server({ ar: [] }))).toEqual(['Unrecognized key: "ar"; remove "ar": it is not a field here']);
    expect(fixes(server({ arg: [] }))).toEqual(['Unrecognized key: "arg"; did you mean "args"?']);
    expect(fixes(server({ '<<': {} }))).toEqual(['Unrecognized key: "<<"; YAML merge keys ("<<") are not read: write the fields out, or give the alias as the whole value (key: *anchor)']);
    expect(fixes(server({ instances: { m: 1 } }))).toEqual(['Unrecognized key: "m"; remove "m": it is not a field here']);
  });

  it('names the field a misspelt key of a union of maps was likely meant to be ({ fromEvn: PATH } for { fromEnv })', () => {
    expect(fixes(server({ env: { A: { fromEvn: 'PATH' } } }))).toEqual([expect.stringMatching(/; did you mean "fromEnv"\?$/)]);
    // No slip of the keyboard: the union's own words stand alone.
    expect(fixes(server({ env: { A: { somewhere: 'PATH' } } }))[0]).not.toContain(';');
  });

  it('says which value to write, and to add what is missing', () => {
    expect(fixes({ version: 2, servers: {} })).toEqual(['Invalid input: expected 1; write 1']);
    expect(fixes(server({ session: 'solo' }))).toEqual(['Invalid option: expected one of "shared"|"perCaller"; write one of "shared", "perCaller"']);
    expect(fixes({ version: 1 })).toEqual(['Invalid input: expected record, received undefined; add it']);
  });

  it('says what to write for a value of the wrong type', () => {
    expect(fixes({ version: 1, servers: 'x' })).toEqual(['Invalid input: expected record, received string; write a map (key: value) here']);
    expect(fixes(server(null))).toEqual(['Invalid input: expected object, received null; write a map (key: value) here']);
    expect(fixes(server({ args: '-y' }))).toEqual(['Invalid input: expected array, received string; write a list ([a, b]) here']);
    expect(fixes(server({ command: 5 }))).toEqual(['Invalid input: expected string, received number; write a string (in quotes if it looks like a number, true, false or null)']);
    expect(fixes(server({ retryable: 'yes' }))).toEqual(['Invalid input: expected boolean, received string; write true or false']);
    expect(fixes(server({ callsPerInstance: '8' }))).toEqual(['Invalid input: expected number, received string; write a number (without quotes)']);
    expect(fixes(server({ instances: { min: 1.5 } }))).toEqual(['Invalid input: expected int, received number; write a whole number']);
    expect(fixes(server({ callsPerInstance: Number.POSITIVE_INFINITY }))).toEqual(['Invalid input: expected number, received Infinity; write a finite number']);
  });

  it('says which bound a value must keep to', () => {
    expect(fixes(server({ instances: { min: -1 } }))).toEqual(['Too small: expected number to be >=0; write 0 or more']);
    expect(fixes(server({ instances: { max: 0 } }))).toEqual(['Too small: expected number to be >0; write more than 0']);
    expect(fixes(server({ instances: { max: 300 } }))).toEqual(['Too big: expected number to be <=256; write 256 or less']);
    expect(fixes(server({ command: '' }))).toEqual(['Too small: expected string to have >=1 characters; write at least 1 character']);
    expect(fixes(server({ args: ['a', 'b', 'c'] }))).toEqual(['Too big: expected array to have <=2 items; give at most 2 items']);
  });
});
