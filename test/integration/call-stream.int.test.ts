import { randomUUID } from 'node:crypto';
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { PassThrough } from 'node:stream';
import { FleetClient } from '@forge-fleet/client';
import { lineReader } from '@forge-fleet/shared';
import { Redis } from 'ioredis';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { type FleetProcess, TestFleet } from '../fixtures/fleet.js';
import { redisUrl } from '../fixtures/redis.js';

type Line = Record<string, unknown> & { id?: string; line?: number; status?: string; error?: { code: string; message: string } };

/** A `POST /v1/calls/stream` held open by the test: lines go out as the test writes them, answers are collected as they come. */
async function openStream(url: string, token: string, wait = 10_000) {
  const body = new PassThrough();
  const answered = request(`${url}/v1/calls/stream?wait=${wait}`, { method: 'POST', headers: { 'content-type': 'application/x-ndjson', authorization: `Bearer ${token}` }, body });
  // undici sends the request once its body yields a first chunk; an empty line is skipped by the dispatcher.
  body.write('\n');
  const response = await answered;
  const lines: Line[] = [];
  const read = lineReader((line) => lines.push(JSON.parse(line) as Line));
  const ended = (async () => {
    for await (const chunk of response.body) read(chunk as Buffer);
  })();
  return {
    status: response.statusCode,
    lines,
    send: (line: object | string) => body.write(`${typeof line === 'string' ? line : JSON.stringify(line)}\n`),
    end: () => body.end(),
    ended,
    answerFor: (key: string | number) => vi.waitFor(() => {
      const found = lines.find((l) => l.id === key || l.line === key);
      expect(found, `an answer for ${key}`).toBeDefined();
      return found!;
    }, { timeout: 10_000, interval: 10 }),
  };
}

describe('call streams: calls as lines of one long request, answers as lines of its response', () => {
  const fleet = new TestFleet();
  let dispatcher: FleetProcess & { url: string };
  let token: string;
  let redis: Redis;
  const release = (id: string) => redis.lpush(`${fleet.prefix}:test:release:{${id}}`, '1');
  const started = async (id: string) => (await redis.blpop(`${fleet.prefix}:test:started:{${id}}`, 10))?.[1];

  beforeAll(async () => {
    redis = new Redis(redisUrl());
    await fleet.worker({ tier: 'platform' });
    dispatcher = await fleet.dispatcher({ FORGE_DEV_MODE: '0' });
    token = await fleet.token({ subject: 'streamer' });
  });

  afterAll(async () => {
    redis?.disconnect();
    await fleet.stopAll();
  });

  it('answers each call as it ends — a slow one holds back no other — refuses bad lines one by one, and ends once the body has', async () => {
    const stream = await openStream(dispatcher.url, token);
    expect(stream.status).toBe(200);
    const [slow, fast, invalid, unknown] = [randomUUID(), randomUUID(), randomUUID(), randomUUID()];
    stream.send({ id: slow, name: 'gated', arguments: {} });
    await started(slow);
    stream.send({ id: fast, name: 'echo', arguments: { n: 1 } });
    expect(await stream.answerFor(fast)).toMatchObject({ id: fast, status: 'completed', result: { structuredContent: { echo: { n: 1 } } } });
    stream.send('this is not JSON');
    stream.send({ name: 'echo', arguments: {} });
    stream.send({ id: invalid, name: 'count', arguments: { n: 'x' } });
    stream.send({ id: unknown, name: 'no_such_tool', arguments: {} });
    expect(await stream.answerFor(3)).toMatchObject({ line: 3, error: { code: 'BAD_REQUEST' } });
    expect((await stream.answerFor(4)).error).toMatchObject({ code: 'BAD_REQUEST', message: expect.stringContaining('id') as string });
    expect(await stream.answerFor(invalid)).toMatchObject({ error: { code: 'SCHEMA_VALIDATION' } });
    expect(await stream.answerFor(unknown)).toMatchObject({ error: { code: 'TOOL_NOT_FOUND' } });
    // A line over the body limit of one call (1 MiB here) is refused without being kept, as a single call would be,
    // and answered by its line number: its id went unread.
    stream.send(`{"id":"${randomUUID()}","name":"echo","arguments":{"pad":"${'x'.repeat(1_100_000)}"}}`);
    expect((await stream.answerFor(7)).error).toMatchObject({ code: 'PAYLOAD_TOO_LARGE', limitBytes: 1_048_576 });
    // Still serving after the bad lines; the slow call's answer comes once it ends.
    stream.end();
    await release(slow);
    expect(await stream.answerFor(slow)).toMatchObject({ status: 'completed', result: { structuredContent: { released: true } } });
    await stream.ended;
    expect(stream.lines).toHaveLength(7);
  });

  it('the client hears of a call too large for a stream line (PAYLOAD_TOO_LARGE), and its other calls go on', async () => {
    const client = new FleetClient({ url: dispatcher.url, token });
    try {
      const [big, small] = await Promise.allSettled([client.call('echo', { pad: 'x'.repeat(1_100_000) }), client.call('echo', { small: true })]);
      expect(big).toMatchObject({ status: 'rejected', reason: { code: 'PAYLOAD_TOO_LARGE' } });
      expect(small).toMatchObject({ status: 'fulfilled', value: { structuredContent: { echo: { small: true } } } });
    } finally {
      await client.close();
    }
  });

  it('refuses a stream without a valid token (UNAUTHENTICATED) before reading a line', async () => {
    const response = await request(`${dispatcher.url}/v1/calls/stream`, { method: 'POST', headers: { 'content-type': 'application/x-ndjson' }, body: `${JSON.stringify({ id: randomUUID(), name: 'echo' })}\n` });
    expect(response.statusCode).toBe(401);
    expect(((await response.body.json()) as Line).error?.code).toBe('UNAUTHENTICATED');
  });

  it('a dispatcher shutting down answers the calls its streams hold with their status, ends every stream (idle ones too) and exits', async () => {
    const leaving = await fleet.dispatcher({ FORGE_DEV_MODE: '0' });
    const [stream, idle] = await Promise.all([openStream(leaving.url, token), openStream(leaving.url, token)]);
    const held = randomUUID();
    stream.send({ id: held, name: 'gated', arguments: {} });
    await started(held);
    // Both streams stay open from the client's side, one of them idle: the shutdown must wait for neither.
    expect(await leaving.stop('SIGTERM')).toBe(0);
    await Promise.all([stream.ended, idle.ended]);
    expect(stream.lines).toEqual([expect.objectContaining({ id: held, status: 'running' })]);
    expect(idle.lines).toEqual([]);
    await release(held);
  });

  it('the client falls back to batches and single requests, by itself, where streams are not served', async () => {
    // In front of the dispatcher, a proxy that knows no streams (an older dispatcher): 404 for them, everything else passed on.
    const seen: string[] = [];
    const target = new URL(dispatcher.url);
    const proxy: Server = createServer((req, res) => {
      seen.push(`${req.method} ${req.url?.split('?')[0]}`);
      if (req.url?.startsWith('/v1/calls/stream') === true) {
        req.resume();
        res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { code: 'ROUTE_NOT_FOUND', message: 'no such route', retryable: false } }));
        return;
      }
      const upstream = httpRequest({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers }, (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      });
      req.pipe(upstream);
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    const client = new FleetClient({ url: `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`, token });
    try {
      const results = await Promise.all([client.call('echo', { a: 1 }), client.call('echo', { b: 2 })]);
      expect(results.map((r) => r.structuredContent?.echo)).toEqual([{ a: 1 }, { b: 2 }]);
      expect(await client.call('echo', { c: 3 })).toMatchObject({ structuredContent: { echo: { c: 3 } } });
      // One stream tried, then the calls went as a batch and as a single call; no stream tried again.
      expect(seen.filter((s) => s.startsWith('POST /v1/calls/stream'))).toHaveLength(1);
      expect(seen).toContain('POST /v1/calls/batch');
      expect(seen).toContain('POST /v1/calls');
    } finally {
      await client.close();
      await new Promise((resolve) => proxy.close(resolve));
    }
  });
});
