import { randomUUID } from 'node:crypto';
import { FleetClient } from '@forge-fleet/client';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestFleet } from '../fixtures/fleet.js';
import { redisUrl } from '../fixtures/redis.js';

const CALL_ID = 'forge-fleet/callId';

/**
 * A call id names one call: resubmitting it with the same tool and arguments
 * (in any key order) answers for that call; with another tool or other
 * arguments it is refused IDEMPOTENCY_CONFLICT (409) on every entrance, and
 * the first call is left as it was.
 */
describe('resubmitting a call id', () => {
  const fleet = new TestFleet();
  let url: string;
  let redis: Redis;
  let mcp: Client;
  const runs = (id: string) => redis.get(`${fleet.prefix}:test:runs:{${id}}`).then((v) => Number(v ?? 0));
  const post = async (path: string, body: unknown): Promise<{ status: number; json: Record<string, unknown> }> => {
    const response = await fetch(`${url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    return { status: response.status, json: (await response.json()) as Record<string, unknown> };
  };
  /** A first call of `count` under a fresh id, completed. */
  const first = async (): Promise<string> => {
    const id = `idem-${randomUUID()}`;
    const answer = await post('/v1/calls?wait=10000', { id, name: 'count', arguments: { n: 1, extra: { a: 1, b: 2 } } });
    expect(answer.json).toMatchObject({ id, status: 'completed' });
    return id;
  };

  beforeAll(async () => {
    redis = new Redis(redisUrl());
    await fleet.worker({ tier: 'platform' });
    url = (await fleet.dispatcher()).url;
    mcp = new Client({ name: 'idempotency-test', version: '0.0.0' });
    await mcp.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`)));
  });

  afterAll(async () => {
    await mcp.close();
    redis.disconnect();
    await fleet.stopAll();
  });

  it('answers for the recorded call when tool and arguments are the same, in any key order', async () => {
    const id = await first();
    const again = await post('/v1/calls?wait=10000', { id, name: 'count', arguments: { extra: { b: 2, a: 1 }, n: 1 } });
    expect(again).toMatchObject({ status: 200, json: { id, status: 'completed', result: { structuredContent: { n: 1, runs: 1 } } } });
    expect(await runs(id)).toBe(1);
  });

  it('refuses other arguments and another tool with 409 IDEMPOTENCY_CONFLICT over POST /v1/calls', async () => {
    const id = await first();
    const args = await post('/v1/calls?wait=10000', { id, name: 'count', arguments: { n: 2, extra: { a: 1, b: 2 } } });
    expect(args).toMatchObject({ status: 409, json: { error: { code: 'IDEMPOTENCY_CONFLICT', retryable: false } } });
    expect(String((args.json.error as { message: string }).message)).toMatch(/other arguments.*new id/);
    const tool = await post('/v1/calls?wait=10000', { id, name: 'echo', arguments: {} });
    expect(tool).toMatchObject({ status: 409, json: { error: { code: 'IDEMPOTENCY_CONFLICT' } } });
    expect(String((tool.json.error as { message: string }).message)).toMatch(/another tool/);
    // The recorded call is untouched.
    const view = await (await fetch(`${url}/v1/calls/${id}`)).json();
    expect(view).toMatchObject({ id, status: 'completed', result: { structuredContent: { n: 1, runs: 1 } } });
    expect(await runs(id)).toBe(1);
  });

  it('refuses it per call in a batch, answering the other calls', async () => {
    const id = await first();
    const fresh = `idem-fresh-${randomUUID()}`;
    const response = await fetch(`${url}/v1/calls/batch?wait=10000`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ calls: [{ id, name: 'count', arguments: { n: 3 } }, { id: fresh, name: 'count', arguments: { n: 4 } }] }),
    });
    const lines = (await response.text()).trim().split('\n').map((l) => JSON.parse(l) as { id?: string; error?: { code: string }; status?: string });
    expect(lines.find((l) => l.id === id || l.error !== undefined)).toMatchObject({ error: { code: 'IDEMPOTENCY_CONFLICT' } });
    expect(lines.find((l) => l.id === fresh)).toMatchObject({ status: 'completed' });
  });

  it('refuses it on a call stream and through FleetClient', async () => {
    const id = await first();
    const streaming = new FleetClient({ url });
    const batching = new FleetClient({ url, stream: false });
    const single = new FleetClient({ url, stream: false, batch: false });
    try {
      await expect(streaming.call('count', { n: 5 }, { id })).rejects.toMatchObject({ code: 'IDEMPOTENCY_CONFLICT', httpStatus: 409 });
      await expect(batching.call('count', { n: 5 }, { id })).rejects.toMatchObject({ code: 'IDEMPOTENCY_CONFLICT', httpStatus: 409 });
      await expect(single.call('count', { n: 5 }, { id })).rejects.toMatchObject({ code: 'IDEMPOTENCY_CONFLICT', httpStatus: 409 });
      // The same call again is answered with its result.
      expect(await streaming.call('count', { n: 1, extra: { a: 1, b: 2 } }, { id })).toMatchObject({ isError: false, structuredContent: { runs: 1 } });
    } finally {
      await streaming.close();
      await batching.close();
      await single.close();
    }
  });

  it('refuses it over MCP as an error result carrying the code', async () => {
    const id = await first();
    const result = await mcp.callTool({ name: 'count', arguments: { n: 9 }, _meta: { [CALL_ID]: id } });
    expect(result.isError).toBe(true);
    expect(result._meta?.['forge-fleet/error']).toMatchObject({ code: 'IDEMPOTENCY_CONFLICT' });
    expect(await runs(id)).toBe(1);
  });
});
