import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { MODERN_REVISION, ModernEraBridge } from './modern-era.js';

type Wire = Record<string, unknown>;

function bridge(): { bridge: ModernEraBridge; toServer: Wire[]; toClient: Wire[] } {
  const toServer: Wire[] = [];
  const toClient: Wire[] = [];
  const b = new ModernEraBridge(
    (m) => {
      toServer.push(m);
    },
    (m) => toClient.push(m),
  );
  return { bridge: b, toServer, toClient };
}

const send = (b: ModernEraBridge, m: Wire): void => void b.fromClient(m as JSONRPCMessage);
const answer = (b: ModernEraBridge, m: Wire): void => b.fromServer({ jsonrpc: '2.0', ...m } as JSONRPCMessage);

const clientInfo = { name: 'forge-worker', version: '1.2.3' };
const initialize = { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: { roots: {} }, clientInfo } };

describe('ModernEraBridge', () => {
  it('answers initialize from the server\'s discovery, with its capabilities, info and instructions', () => {
    const { bridge: b, toServer, toClient } = bridge();
    send(b, initialize);
    expect(toServer).toHaveLength(1);
    const discover = toServer[0] as { id: string; method: string; params: { _meta: Wire } };
    expect(discover.method).toBe('server/discover');
    expect(discover.params._meta).toEqual({
      'io.modelcontextprotocol/protocolVersion': MODERN_REVISION,
      'io.modelcontextprotocol/clientInfo': clientInfo,
      'io.modelcontextprotocol/clientCapabilities': { roots: {} },
    });
    expect(toClient).toEqual([]);
    answer(b, {
      id: discover.id,
      result: { supportedVersions: [MODERN_REVISION], capabilities: { tools: { listChanged: true } }, instructions: 'be nice', _meta: { 'io.modelcontextprotocol/serverInfo': { name: 'srv', version: '9' } } },
    });
    expect(toClient).toEqual([
      { jsonrpc: '2.0', id: 0, result: { protocolVersion: '2025-11-25', capabilities: { tools: { listChanged: true } }, serverInfo: { name: 'srv', version: '9' }, instructions: 'be nice' } },
    ]);
  });

  it('passes a failed discovery on as the failure of initialize', () => {
    const { bridge: b, toServer, toClient } = bridge();
    send(b, initialize);
    const error = { code: -32601, message: 'Method not found' };
    answer(b, { id: (toServer[0] as { id: string }).id, error });
    expect(toClient).toEqual([{ jsonrpc: '2.0', id: 0, error }]);
  });

  it('stamps every later request and notification with the revision, client info and capabilities, keeping their own _meta', () => {
    const { bridge: b, toServer } = bridge();
    send(b, initialize);
    send(b, { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'add', arguments: { a: 1 }, _meta: { progressToken: 'forge-1' } } });
    send(b, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 1, reason: 'gone' } });
    send(b, { jsonrpc: '2.0', id: 2, method: 'tools/list' });
    const [, call, cancel, list] = toServer as { params: Wire & { _meta: Wire } }[];
    expect(call?.params).toMatchObject({ name: 'add', arguments: { a: 1 } });
    expect(call?.params._meta).toMatchObject({ progressToken: 'forge-1', 'io.modelcontextprotocol/protocolVersion': MODERN_REVISION, 'io.modelcontextprotocol/clientInfo': clientInfo });
    expect(cancel?.params).toMatchObject({ requestId: 1, reason: 'gone', _meta: { 'io.modelcontextprotocol/protocolVersion': MODERN_REVISION } });
    expect(list?.params._meta).toMatchObject({ 'io.modelcontextprotocol/clientCapabilities': { roots: {} } });
  });

  it('leaves the client\'s answers to the server\'s requests unstamped', () => {
    const { bridge: b, toServer } = bridge();
    const reply = { jsonrpc: '2.0', id: 'srv-1', result: { roots: [] } };
    send(b, reply);
    expect(toServer).toEqual([reply]);
  });

  it('opens a tool-list subscription instead of sending notifications/initialized, and drops its acknowledgement and answer', () => {
    const { bridge: b, toServer, toClient } = bridge();
    send(b, { jsonrpc: '2.0', method: 'notifications/initialized' });
    expect(toServer).toHaveLength(1);
    const listen = toServer[0] as { id: string; method: string; params: Wire };
    expect(listen.method).toBe('subscriptions/listen');
    expect(listen.params).toMatchObject({ notifications: { toolsListChanged: true } });
    answer(b, { method: 'notifications/subscriptions/acknowledged', params: {} });
    answer(b, { method: 'notifications/tools/list_changed' });
    answer(b, { id: listen.id, result: {} });
    expect(toClient).toEqual([{ jsonrpc: '2.0', method: 'notifications/tools/list_changed' }]);
    b.close();
  });

  describe('a listen stream that ends', () => {
    afterEach(() => {
      vi.useRealTimers();
    });

    it('is opened again a second later, and the client told the tools may have changed meanwhile', () => {
      vi.useFakeTimers();
      const { bridge: b, toServer, toClient } = bridge();
      send(b, { jsonrpc: '2.0', method: 'notifications/initialized' });
      answer(b, { method: 'notifications/subscriptions/acknowledged', params: {} });
      answer(b, { id: (toServer[0] as { id: string }).id, error: { code: -32000, message: 'the upstream ended the listen stream' } });
      expect(toServer).toHaveLength(1);
      vi.advanceTimersByTime(1_000);
      expect(toServer.map((m) => m.method)).toEqual(['subscriptions/listen', 'subscriptions/listen']);
      expect(toClient).toEqual([{ jsonrpc: '2.0', method: 'notifications/tools/list_changed' }]);
      // The new stream is followed as the first was; as it too ended at once, the next wait is twice as long.
      const endAtOnce = (n: number): void => {
        answer(b, { method: 'notifications/subscriptions/acknowledged', params: {} });
        answer(b, { id: (toServer[n] as { id: string }).id, result: {} });
      };
      endAtOnce(1);
      vi.advanceTimersByTime(1_999);
      expect(toServer).toHaveLength(2);
      vi.advanceTimersByTime(1);
      expect(toServer).toHaveLength(3);
      // Doubling up to 30 s between streams that end at once.
      for (let n = 2; n < 7; n += 1) {
        endAtOnce(n);
        vi.advanceTimersByTime(30_000);
      }
      expect(toServer).toHaveLength(8);
      endAtOnce(7);
      vi.advanceTimersByTime(29_999);
      expect(toServer).toHaveLength(8);
      vi.advanceTimersByTime(1);
      expect(toServer).toHaveLength(9);
      // One that stayed open a minute was a good one: the wait starts over at a second.
      answer(b, { method: 'notifications/subscriptions/acknowledged', params: {} });
      vi.advanceTimersByTime(60_000);
      answer(b, { id: (toServer[8] as { id: string }).id, result: {} });
      vi.advanceTimersByTime(1_000);
      expect(toServer).toHaveLength(10);
      b.close();
    });

    it('is not opened again when the server never acknowledged it (it does not offer one), nor once the bridge is closed', () => {
      vi.useFakeTimers();
      const refused = bridge();
      send(refused.bridge, { jsonrpc: '2.0', method: 'notifications/initialized' });
      answer(refused.bridge, { id: (refused.toServer[0] as { id: string }).id, error: { code: -32601, message: 'Method not found' } });
      vi.advanceTimersByTime(10_000);
      expect(refused.toServer).toHaveLength(1);
      expect(refused.toClient).toEqual([]);

      const closing = bridge();
      send(closing.bridge, { jsonrpc: '2.0', method: 'notifications/initialized' });
      answer(closing.bridge, { method: 'notifications/subscriptions/acknowledged', params: {} });
      answer(closing.bridge, { id: (closing.toServer[0] as { id: string }).id, result: {} });
      closing.bridge.close();
      vi.advanceTimersByTime(10_000);
      expect(closing.toServer).toHaveLength(1);
      expect(closing.toClient).toEqual([]);
    });
  });

  it('hands a message it could not send to the caller as the send\'s failure, its own requests included', async () => {
    const down = new TypeError('fetch failed');
    const b = new ModernEraBridge(
      () => Promise.reject(down),
      () => undefined,
    );
    await expect(b.fromClient(initialize as JSONRPCMessage)).rejects.toBe(down);
    await expect(b.fromClient({ jsonrpc: '2.0', id: 3, method: 'ping' })).rejects.toBe(down);
    await expect(b.fromClient({ jsonrpc: '2.0', id: 4, method: 'tools/list' })).rejects.toBe(down);
    // The subscription is the bridge's own business: its failure is not the client's initialized notification's.
    await expect(b.fromClient({ jsonrpc: '2.0', method: 'notifications/initialized' })).resolves.toBeUndefined();
  });

  it('turns ping into a discovery and answers it with an empty result, or the discovery\'s error', () => {
    const { bridge: b, toServer, toClient } = bridge();
    send(b, { jsonrpc: '2.0', id: 7, method: 'ping' });
    send(b, { jsonrpc: '2.0', id: 8, method: 'ping' });
    const [first, second] = toServer as { id: string; method: string }[];
    expect(first?.method).toBe('server/discover');
    answer(b, { id: second?.id, error: { code: -32603, message: 'busy' } });
    answer(b, { id: first?.id, result: { capabilities: {} } });
    expect(toClient).toEqual([
      { jsonrpc: '2.0', id: 8, error: { code: -32603, message: 'busy' } },
      { jsonrpc: '2.0', id: 7, result: {} },
    ]);
  });

  it('passes results, progress and errors of the client\'s own requests through unchanged, including a string id the bridge did not send', () => {
    const { bridge: b, toClient } = bridge();
    const messages = [
      { jsonrpc: '2.0', id: 1, result: { content: [] } },
      { jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 'forge-1', progress: 1 } },
      { jsonrpc: '2.0', id: 'forge-era-99', result: {} },
      { jsonrpc: '2.0', id: 'srv-2', method: 'roots/list' },
    ];
    for (const m of messages) answer(b, m);
    // forge-era-99 is shaped like the bridge's but is not one it sent: dropped, not handed to a client that never asked.
    expect(toClient).toEqual([messages[0], messages[1], messages[3]]);
  });
});
