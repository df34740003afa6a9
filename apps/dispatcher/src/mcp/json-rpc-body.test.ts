import { ErrorCode } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { checkBody, parseRefusal } from './json-rpc-body.js';

const request = (method: string, params?: unknown, id: unknown = 7) => ({ jsonrpc: '2.0', id, method, ...(params === undefined ? {} : { params }) });

describe('checkBody', () => {
  it('passes the messages the fleet serves, a notification, a response, and a 2025-03-26 batch', () => {
    expect(checkBody(request('tools/call', { name: 'echo', arguments: { a: 1 }, _meta: { progressToken: 1 } }), '2025-11-25')).toBeUndefined();
    expect(checkBody(request('tools/list', {}), undefined)).toBeUndefined();
    expect(checkBody(request('initialize', { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'c', version: '1' } }), undefined)).toBeUndefined();
    expect(checkBody(request('ping'), undefined)).toBeUndefined();
    expect(checkBody({ jsonrpc: '2.0', method: 'notifications/initialized' }, undefined)).toBeUndefined();
    expect(checkBody({ jsonrpc: '2.0', method: 'notifications/roots/list_changed', params: {} }, undefined)).toBeUndefined();
    expect(checkBody({ jsonrpc: '2.0', id: 3, result: {} }, undefined)).toBeUndefined();
    expect(checkBody([request('ping', undefined, 1), request('ping', undefined, 2)], '2025-03-26')).toBeUndefined();
    expect(checkBody([request('ping', undefined, 1), request('nope', undefined, 2)], undefined)).toBeUndefined();
  });

  it('answers a request whose params do not fit with -32602, its id and one line naming the field and what to send', () => {
    expect(checkBody(request('tools/call', { arguments: {} }), undefined)).toEqual({
      status: 200,
      body: { jsonrpc: '2.0', id: 7, error: { code: ErrorCode.InvalidParams, message: 'Invalid params for tools/call: params.name: expected string, received undefined; send { name: "<tool>", arguments: { … } } (arguments an object, when given)' } },
    });
    expect(checkBody(request('tools/call', { name: 'x', arguments: [] }), undefined)?.body.error.message).toMatch(/^Invalid params for tools\/call: params\.arguments: expected object, received array;/);
    // A name no tool can have is refused as /v1 refuses it (1–128 characters), not looked up and "not found".
    expect(checkBody(request('tools/call', { name: '', arguments: {} }), undefined)?.body.error.message).toMatch(/^Invalid params for tools\/call: params\.name: Too small: expected string to have >=1 characters;/);
    const long = checkBody(request('tools/call', { name: 'x'.repeat(300) }), undefined)?.body.error.message ?? '';
    expect(long).toMatch(/^Invalid params for tools\/call: params\.name: Too big: expected string to have <=128 characters;/);
    expect(long).not.toContain('x'.repeat(129));
    expect(checkBody(request('tools/call', { name: 'x'.repeat(128) }), undefined)).toBeUndefined();
    expect(checkBody(request('ping', 'x'), undefined)?.body.error).toEqual({ code: ErrorCode.InvalidParams, message: 'Invalid params for ping: params must be an object, not string; send no params, or {}' });
  });

  it('answers a task-augmented tools/call with -32602 and its id, not as an internal error: the server declares no tasks', () => {
    const answer = checkBody(request('tools/call', { name: 'x', arguments: {}, task: { ttl: 60_000 } }), '2025-11-25');
    expect(answer).toMatchObject({ status: 200, body: { jsonrpc: '2.0', id: 7, error: { code: ErrorCode.InvalidParams } } });
    expect(answer?.body.error.message).toMatch(/^Invalid params for tools\/call: this server does not support tasks .*; send the same tools\/call without task/);
  });

  it('answers an unknown method with -32601 and the methods served', () => {
    expect(checkBody(request('prompts/list'), undefined)).toEqual({
      status: 200,
      body: { jsonrpc: '2.0', id: 7, error: { code: ErrorCode.MethodNotFound, message: 'Method not found: "prompts/list"; this server serves initialize, ping, tools/list, tools/call' } },
    });
  });

  it.each([[[]], [1], ['x'], [null], [[1]], [{}], [{ jsonrpc: '2.0' }], [request('ping', undefined, null)], [request('ping', undefined, 1.5)], [{ ...request('ping'), result: {} }]])(
    'answers %j with 400, -32600 and id null',
    (body) => {
      const refused = checkBody(body, undefined);
      expect(refused).toMatchObject({ status: 400, body: { jsonrpc: '2.0', id: null, error: { code: ErrorCode.InvalidRequest } } });
      expect(refused?.body.error.message).toMatch(/^(batch member \d+: )?Invalid Request: /);
    },
  );

  it('refuses every batch of MCP 2025-06-18 and later, and a batch with a member that does not fit', () => {
    for (const version of ['2025-06-18', '2025-11-25']) {
      expect(checkBody([request('ping')], version)).toMatchObject({ status: 400, body: { id: null, error: { code: ErrorCode.InvalidRequest } } });
    }
    expect(checkBody([request('ping', undefined, 1), request('tools/call', {}, 2)], undefined)).toMatchObject({
      status: 400,
      body: { id: null, error: { code: ErrorCode.InvalidParams, message: expect.stringMatching(/^batch member 1: Invalid params for tools\/call/) as string } },
    });
  });

  it('refuses a notification whose params do not fit with 400 and no id', () => {
    const refused = checkBody({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: [] } }, undefined);
    expect(refused).toEqual({ status: 400, body: { jsonrpc: '2.0', error: { code: ErrorCode.InvalidParams, message: expect.stringContaining('params.requestId') as string } } });
  });
});

describe('parseRefusal', () => {
  it('answers a body that is not JSON with -32700 and one that has a forbidden key with -32600', () => {
    expect(parseRefusal('not-json')).toMatchObject({ status: 400, body: { id: null, error: { code: ErrorCode.ParseError } } });
    expect(parseRefusal('forbidden-key')).toMatchObject({ status: 400, body: { id: null, error: { code: ErrorCode.InvalidRequest } } });
  });
});
