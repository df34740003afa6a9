import type { FetchLike } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { SessionHttpTransport } from './session-transport.js';

const SESSION = '6f1c2d3e-session';

/**
 * An upstream of one session (`session`; null: it keeps none): `initialize` opens it; every later request is
 * answered with the status `answer(method)` gives (404: the session is gone). Notifications are accepted with 202.
 */
function upstream(answer: (method: string) => number, session: string | null): FetchLike {
  return (_url, init) => Promise.resolve(answerTo(JSON.parse(init?.body as string) as { id?: number; method: string }));

  function answerTo(message: { id?: number; method: string }): Response {
    if (message.method === 'initialize') {
      return Response.json({ jsonrpc: '2.0', id: message.id, result: { protocolVersion: '2025-06-18', capabilities: {}, serverInfo: { name: 'u', version: '1' } } }, { headers: session === null ? {} : { 'mcp-session-id': session } });
    }
    if (message.id === undefined) return new Response(null, { status: 202 });
    const status = answer(message.method);
    return status === 200 ? Response.json({ jsonrpc: '2.0', id: message.id, result: { tools: [] } }) : Response.json({ jsonrpc: '2.0', id: null, error: { code: -32001, message: 'Session not found' } }, { status });
  }
}

const request = (id: number, method: string, params: Record<string, unknown> = {}): JSONRPCMessage => ({ jsonrpc: '2.0', id, method, params });
const callWith = (id: number, args: Record<string, unknown>): JSONRPCMessage => request(id, 'tools/call', { name: 'echo', arguments: args });

async function opened(answer: (method: string) => number, session: string | null = SESSION): Promise<SessionHttpTransport> {
  const transport = new SessionHttpTransport(new URL('http://upstream.test/mcp'), { fetch: upstream(answer, session) });
  await transport.send(request(0, 'initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'c', version: '1' } }));
  await transport.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
  return transport;
}

describe('SessionHttpTransport', () => {
  it('tells a tools/call the upstream answered 404 to its session id (not run) from one it answered otherwise (may have run)', async () => {
    const transport = await opened((method) => (method === 'tools/call' ? 404 : 200));
    const expired = { message: 'a' };
    await expect(transport.send(callWith(1, expired))).rejects.toMatchObject({ code: 404 });
    expect(transport.notRun(expired)).toBe(true);
    // Same content, another object: another call.
    expect(transport.notRun({ message: 'a' })).toBe(false);

    const failing = await opened(() => 500);
    const failed = { message: 'b' };
    await expect(failing.send(callWith(2, failed))).rejects.toMatchObject({ code: 500 });
    expect(failing.notRun(failed)).toBe(false);
  });

  it('takes a 404 to a request without a session id (an upstream that keeps none) for no session end', async () => {
    const transport = await opened(() => 404, null);
    const args = { message: 'c' };
    await expect(transport.send(callWith(3, args))).rejects.toMatchObject({ code: 404 });
    expect(transport.notRun(args)).toBe(false);
  });

  it('says whether the upstream answered a request of the session beyond initialize (a notification accepted is none)', async () => {
    const transport = await opened(() => 200);
    expect(transport.answered).toBe(false);
    await transport.send(request(4, 'tools/list'));
    expect(transport.answered).toBe(true);
  });
});
