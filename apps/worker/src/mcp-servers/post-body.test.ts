import { describe, expect, it } from 'vitest';
import { cancelledIdsOf, requestIdsOf } from './post-body.js';

const message = (m: Record<string, unknown>) => ({ jsonrpc: '2.0', ...m });

describe('requestIdsOf', () => {
  it('finds the ids of requests, not of notifications or answers, in one message or a batch', () => {
    expect(requestIdsOf(JSON.stringify(message({ id: 5, method: 'tools/call', params: { name: 'x' } })))).toEqual([5]);
    expect(requestIdsOf(JSON.stringify([message({ id: 'a', method: 'ping' }), message({ method: 'notifications/cancelled' }), message({ id: 9, result: {} })]))).toEqual(['a']);
    expect(requestIdsOf('not json')).toEqual([]);
    expect(requestIdsOf(undefined)).toEqual([]);
    expect(requestIdsOf(JSON.stringify([null, 3, message({ id: { no: 1 }, method: 'ping' })]))).toEqual([]);
  });

  it('keeps only the requests of a method when asked', () => {
    const batch = JSON.stringify([message({ id: 1, method: 'tools/call' }), message({ id: 2, method: 'ping' }), message({ id: 'c', method: 'tools/call' })]);
    expect(requestIdsOf(batch, 'tools/call')).toEqual([1, 'c']);
  });
});

describe('cancelledIdsOf', () => {
  it('finds the request ids a body cancels, in one message or a batch', () => {
    expect(cancelledIdsOf(JSON.stringify(message({ method: 'notifications/cancelled', params: { requestId: 7, reason: 'timeout' } })))).toEqual([7]);
    const batch = JSON.stringify([message({ method: 'notifications/cancelled', params: { requestId: 'x' } }), message({ id: 3, method: 'notifications/cancelled' }), message({ id: 4, method: 'ping' })]);
    expect(cancelledIdsOf(batch)).toEqual(['x']);
    expect(cancelledIdsOf(JSON.stringify(message({ id: 1, method: 'tools/call' })))).toEqual([]);
    expect(cancelledIdsOf('notifications/cancelled but not json')).toEqual([]);
  });
});
