import { describe, expect, it } from 'vitest';
import type { ServerResponse } from 'node:http';
import { directCallOf, internalErrorOf, writeDirectAnswer } from './direct-call.js';

const headers = { accept: 'application/json, text/event-stream', 'content-type': 'application/json' };
const call = (params: Record<string, unknown>, id: unknown = 7) => ({ jsonrpc: '2.0', id, method: 'tools/call', params });

describe('which /mcp requests are answered without the SDK', () => {
  it('takes a plain tools/call, with or without arguments, _meta and a supported protocol version', () => {
    expect(directCallOf(call({ name: 'echo', arguments: { a: 1 } }), headers)).toEqual({ id: 7, request: { method: 'tools/call', params: { name: 'echo', arguments: { a: 1 } } } });
    expect(directCallOf(call({ name: 'echo', _meta: { 'forge-fleet/callId': 'x' } }, 'abc'), { ...headers, 'content-type': 'application/json; charset=utf-8', 'mcp-protocol-version': '2025-06-18' })?.id).toBe('abc');
  });

  it('leaves to the SDK what needs its server or transport: progress, tasks, other methods, batches, notifications', () => {
    expect(directCallOf(call({ name: 'echo', _meta: { progressToken: 1 } }), headers)).toBeUndefined();
    expect(directCallOf(call({ name: 'echo', task: { ttl: 1000 } }), headers)).toBeUndefined();
    expect(directCallOf({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }, headers)).toBeUndefined();
    expect(directCallOf([call({ name: 'echo' })], headers)).toBeUndefined();
    expect(directCallOf({ jsonrpc: '2.0', method: 'tools/call', params: { name: 'echo' } }, headers)).toBeUndefined();
  });

  it("leaves to the SDK the headers its transport refuses, so they get the transport's own answers", () => {
    expect(directCallOf(call({ name: 'echo' }), { ...headers, accept: 'application/json' })).toBeUndefined();
    expect(directCallOf(call({ name: 'echo' }), { ...headers, accept: undefined })).toBeUndefined();
    expect(directCallOf(call({ name: 'echo' }), { ...headers, 'content-type': 'text/plain' })).toBeUndefined();
    expect(directCallOf(call({ name: 'echo' }), { ...headers, 'mcp-protocol-version': '1999-01-01' })).toBeUndefined();
  });

  it("answers a handler's throw as the SDK's protocol layer does", () => {
    expect(internalErrorOf(3, new Error('boom'))).toEqual({ jsonrpc: '2.0', id: 3, error: { code: -32603, message: 'boom' } });
    expect(internalErrorOf('a', Object.assign(new Error('no'), { code: -32602, data: { why: 1 } }))).toEqual({ jsonrpc: '2.0', id: 'a', error: { code: -32602, message: 'no', data: { why: 1 } } });
  });

  it('writes an answer as one JSON body, a cancelled request (no answer) as an event stream that just ends, and nothing once the response is over', () => {
    const response = (over = false) => {
      const written: { status?: number; headers?: Record<string, string>; body?: unknown; ends: number } = { ends: 0 };
      const res = {
        writableEnded: over,
        destroyed: false,
        writeHead: (status: number, headers: Record<string, string>) => Object.assign(written, { status, headers }),
        end: (body?: unknown) => Object.assign(written, { body, ends: written.ends + 1 }),
      };
      return { res: res as unknown as ServerResponse, written };
    };
    const message = { jsonrpc: '2.0' as const, id: 'a', result: { content: [{ type: 'text' as const, text: 'ok' }] } };
    const answered = response();
    writeDirectAnswer(answered.res, message);
    expect(answered.written).toMatchObject({ status: 200, headers: { 'content-type': 'application/json' }, ends: 1 });
    expect(JSON.parse(answered.written.body as string)).toEqual(message);
    const cancelled = response();
    writeDirectAnswer(cancelled.res, undefined);
    expect(cancelled.written).toMatchObject({ status: 200, headers: { 'content-type': 'text/event-stream' }, body: undefined, ends: 1 });
    const over = response(true);
    writeDirectAnswer(over.res, message);
    expect(over.written).toEqual({ ends: 0 });
  });
});
