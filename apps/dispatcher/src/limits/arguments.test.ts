import { isFleetError } from '@forge-fleet/shared';
import { describe, expect, it } from 'vitest';
import { checkArguments } from './arguments.js';

const limits = { maxBytes: 1024, maxDepth: 4 };

function refusal(args: Record<string, unknown>): { code: string; httpStatus: number; message: string } {
  try {
    checkArguments(args, limits);
  } catch (error) {
    if (isFleetError(error)) return { code: error.code, httpStatus: error.httpStatus, message: error.message };
    throw error;
  }
  throw new Error('expected a refusal');
}

describe('call argument limits', () => {
  it('admits arguments within every limit', () => {
    expect(() => checkArguments({ a: { b: { c: [1, 'x', null] } } }, limits)).not.toThrow();
  });

  it('refuses nesting deeper than the limit (400) and names the path and the setting', () => {
    const error = refusal({ a: { b: { c: { d: { e: 1 } } } } });
    expect(error).toMatchObject({ code: 'BAD_REQUEST', httpStatus: 400 });
    expect(error.message).toMatch(/deeper than 4 levels at 'a\.b\.c\.d'.*FORGE_MAX_JSON_DEPTH/);
    expect(refusal({ a: [[[[1]]]] }).message).toMatch(/at 'a\[0\]\[0\]\[0\]'/);
  });

  it('refuses arguments over the byte limit (413) with their size and the setting', () => {
    const error = refusal({ s: 'x'.repeat(2000) });
    expect(error).toMatchObject({ code: 'PAYLOAD_TOO_LARGE', httpStatus: 413 });
    expect(error.message).toMatch(/arguments are 2008 bytes.*limit of 1024.*FORGE_MAX_ARGUMENT_BYTES/);
    // Bytes, not characters.
    expect(refusal({ s: 'é'.repeat(600) }).code).toBe('PAYLOAD_TOO_LARGE');
  });

  it("refuses '__proto__', 'constructor' and 'prototype' keys anywhere, and pollutes nothing", () => {
    for (const key of ['__proto__', 'constructor', 'prototype']) {
      const args = JSON.parse(`{"ok":{"list":[{"${key}":{"polluted":true}}]}}`) as Record<string, unknown>;
      const error = refusal(args);
      expect(error).toMatchObject({ code: 'BAD_REQUEST', httpStatus: 400 });
      expect(error.message).toContain(`'${key}'`);
    }
    expect(({} as Record<string, unknown>)['polluted']).toBeUndefined();
  });

  it('refuses a number JSON cannot carry (1e400 parses as Infinity), naming where it is, as FleetClient does', () => {
    const args = JSON.parse('{"a":1,"b":{"list":[2,1e400]}}') as Record<string, unknown>;
    const error = refusal(args);
    expect(error).toMatchObject({ code: 'BAD_REQUEST', httpStatus: 400 });
    expect(error.message).toMatch(/number JSON cannot carry at 'b\.list\[1\]' \(it is Infinity/);
    expect(refusal(JSON.parse('{"n":-1e999}') as Record<string, unknown>).message).toContain("at 'n' (it is -Infinity");
    expect(() => checkArguments({ max: Number.MAX_VALUE, min: -Number.MAX_VALUE, tiny: 5e-324 }, limits)).not.toThrow();
  });
});
