import { z } from 'zod';
import { describe, expect, it } from 'vitest';
import { fieldNamesOf, issueFix } from './issue-fix.js';

const Inner = z.strictObject({ min: z.number().optional(), max: z.number().optional() });
const File = z.strictObject({
  version: z.literal(1),
  servers: z.record(z.string(), z.strictObject({ instances: Inner.optional(), session: z.enum(['shared', 'perCaller']).optional(), callsPerInstance: z.number().default(8) })),
});
const fields = fieldNamesOf(File);
const fixes = (value: unknown): string[] => {
  const parsed = File.safeParse(value);
  return parsed.success ? [] : parsed.error.issues.map((issue) => `${issue.message}${issueFix(issue, fields)}`);
};

describe('issueFix', () => {
  it('reads every field name of the schema, at any depth', () => {
    expect([...fields].sort()).toEqual(['callsPerInstance', 'instances', 'max', 'min', 'servers', 'session', 'version']);
  });

  it('names the field an unknown key was likely meant to be, or says to remove it', () => {
    expect(fixes({ version: 1, servers: { a: { instance: {} } } })).toEqual(['Unrecognized key: "instance"; did you mean "instances"?']);
    expect(fixes({ version: 1, servers: { a: { sesion: 'shared', Session: 'x' } } })[0]).toBe('Unrecognized keys: "sesion", "Session"; did you mean "session"?; did you mean "session"?');
    expect(fixes({ version: 1, servers: { a: { callsPerInstnace: 2 } } })).toEqual(['Unrecognized key: "callsPerInstnace"; did you mean "callsPerInstance"?']);
    expect(fixes({ version: 1, servers: { a: { color: 'red' } } })).toEqual(['Unrecognized key: "color"; remove "color": it is not a field here']);
  });

  it('says which value to write, and to add what is missing', () => {
    expect(fixes({ version: 2, servers: {} })).toEqual(['Invalid input: expected 1; write 1']);
    expect(fixes({ version: 1, servers: { a: { session: 'solo' } } })).toEqual(['Invalid option: expected one of "shared"|"perCaller"; write one of "shared", "perCaller"']);
    expect(fixes({ version: 1 })).toEqual(['Invalid input: expected record, received undefined; add it']);
    expect(fixes({ version: 1, servers: 'x' })).toEqual(['Invalid input: expected record, received string']);
  });
});
