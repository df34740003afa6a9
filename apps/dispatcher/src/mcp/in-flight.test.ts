import { describe, expect, it } from 'vitest';
import { InFlightCalls } from './in-flight.js';

describe('InFlightCalls', () => {
  it("tells clients of one token apart by the session id each was given, and a token's clients from another's", () => {
    const token = { authorization: 'Bearer t' };
    expect(InFlightCalls.clientOf({ ...token, 'mcp-session-id': 'a' })).not.toBe(InFlightCalls.clientOf({ ...token, 'mcp-session-id': 'b' }));
    expect(InFlightCalls.clientOf({ ...token, 'mcp-session-id': 'a' })).toBe(InFlightCalls.clientOf({ ...token, 'mcp-session-id': 'a' }));
    expect(InFlightCalls.clientOf(token)).not.toBe(InFlightCalls.clientOf({ authorization: 'Bearer u' }));
  });

  it('cancels the one request a client has under an id, and none when several clients without a session share the key', () => {
    const calls = new InFlightCalls();
    const one = new AbortController();
    const done = calls.add('client', 1, one);
    expect(calls.cancel('client', 2, 'no such request')).toBe('none');
    expect(calls.cancel('client', 1, 'gave up')).toBe('cancelled');
    expect(one.signal.reason).toBe('gave up');
    done();
    const [a, b] = [new AbortController(), new AbortController()];
    calls.add('shared', 1, a);
    calls.add('shared', 1, b);
    expect(calls.cancel('shared', 1, 'whose?')).toBe('ambiguous');
    expect(a.signal.aborted || b.signal.aborted).toBe(false);
  });
});
