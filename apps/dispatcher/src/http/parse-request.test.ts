import { z } from 'zod';
import { describe, expect, it } from 'vitest';
import { WaitQuery } from './calls.js';
import { parseRequest } from './errors.js';

const refusal = (fn: () => unknown): { code?: string; message?: string } => {
  try {
    fn();
  } catch (error) {
    return error as { code?: string; message?: string };
  }
  throw new Error('accepted, but a refusal was expected');
};

describe('parseRequest', () => {
  it('refuses a query parameter given more than once, saying to give it once (it read as NaN)', () => {
    expect(refusal(() => parseRequest(WaitQuery, { wait: ['5000', '10'] }, 'query'))).toMatchObject({ code: 'BAD_REQUEST', message: 'bad request: query: wait is given 2 times; give it once' });
    expect(parseRequest(WaitQuery, { wait: '5000' }, 'query')).toEqual({ wait: 5000 });
  });

  it('names a problem of the whole part once, not as "body: body:"', () => {
    const Body = z.strictObject({ name: z.string() });
    expect(refusal(() => parseRequest(Body, { name: 'x', extra: 1 }, 'body')).message).toBe('bad request: body: Unrecognized key: "extra"');
    expect(refusal(() => parseRequest(Body, { name: 7 }, 'body')).message).toBe('bad request: body: name: Invalid input: expected string, received number');
  });
});
