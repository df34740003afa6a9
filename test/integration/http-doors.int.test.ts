import { connect, type Socket } from 'node:net';
import { FleetClient } from '@forge-fleet/client';
import { SignJWT } from 'jose';
import { createPrivateKey } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FleetProcess, TestFleet } from '../fixtures/fleet.js';
import { until } from '../fixtures/wait.js';

/**
 * The dispatcher's HTTP doors under attack (issue #15, items 9–14): connections
 * that never finish, requests for another host or from a foreign page, 401s
 * without a challenge, inputs that reached a 500 or a framework's own body, a
 * `__proto__` key answered differently on each entrance, tokens from the future.
 */

/** The dispatcher runs with this many file descriptors, so that holding them all open is within a test's reach. */
const DISPATCHER_FDS = 1024;
/** More slow requests than the dispatcher has descriptors. */
const SLOW_BODIES = 1500;
const MAX_UNAUTHENTICATED = 200;

/** One HTTP/1.1 exchange over a raw socket, so the test controls every byte (Host, framing, pacing). */
interface Raw {
  readonly socket: Socket;
  /** Everything the server sent so far. */
  received(): string;
  readonly closed: Promise<void>;
  isClosed(): boolean;
}

function raw(url: string, head: string): Promise<Raw> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect({ host: hostname, port: Number(port) });
    let text = '';
    let closed = false;
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => (text += chunk));
    // A server that closes with unread input resets the connection; for these tests that is closed too.
    socket.on('error', () => undefined);
    const closedPromise = new Promise<void>((done) => socket.once('close', () => ((closed = true), done())));
    socket.once('connect', () => {
      socket.write(head);
      resolve({ socket, received: () => text, closed: closedPromise, isClosed: () => closed });
    });
    socket.once('error', reject);
  });
}

/** A whole request over a raw socket, answered once the server closes or the answer is complete. */
async function exchange(url: string, request: string): Promise<{ status: number; headers: Record<string, string>; body: string }> {
  const r = await raw(url, request);
  const text = await until('a complete answer', () => {
    const t = r.received();
    const end = t.indexOf('\r\n\r\n');
    if (end < 0) return r.isClosed() ? Promise.reject(new Error(`closed without an answer: ${t}`)) : undefined;
    const length = /\r\ncontent-length: *(\d+)/i.exec(t.slice(0, end));
    if (length !== null && t.length >= end + 4 + Number(length[1])) return t;
    return r.isClosed() ? t : undefined;
  });
  r.socket.destroy();
  const [head = '', ...rest] = text.split('\r\n\r\n');
  const [statusLine = '', ...lines] = head.split('\r\n');
  const headers = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
  return { status: Number(statusLine.split(' ')[1]), headers, body: rest.join('\r\n\r\n') };
}

const json = (body: string): { error?: { code?: unknown; message?: unknown } } => JSON.parse(body) as { error?: { code?: unknown; message?: unknown } };

describe('the HTTP doors', () => {
  const fleet = new TestFleet();
  let dispatcher: FleetProcess & { url: string };
  let hostPort: string;
  let agent: string;
  let admin: string;

  beforeAll(async () => {
    await fleet.worker({ tier: 'platform' });
    dispatcher = await fleet.dispatcher(
      { FORGE_DEV_MODE: '0', FORGE_MAX_UNAUTHENTICATED_CONNECTIONS: String(MAX_UNAUTHENTICATED), FORGE_HEADERS_TIMEOUT_MS: '2000' },
      { wrapper: ['prlimit', `--nofile=${DISPATCHER_FDS}:${DISPATCHER_FDS}`] },
    );
    hostPort = new URL(dispatcher.url).host;
    agent = await fleet.token({ subject: 'doors-agent' });
    admin = await fleet.token({ subject: 'doors-admin', role: 'admin' });
  });

  afterAll(() => fleet.stopAll());

  const call = (args: Record<string, unknown> = { ok: true }) =>
    fetch(`${dispatcher.url}/v1/calls?wait=10000`, { method: 'POST', headers: { authorization: `Bearer ${agent}`, 'content-type': 'application/json' }, body: JSON.stringify({ name: 'echo', arguments: args }) });

  /** /healthz and an authenticated call both answer. */
  async function stillServing(): Promise<void> {
    expect((await fetch(`${dispatcher.url}/healthz`)).status).toBe(200);
    expect(await (await call({ still: 'served' })).json()).toMatchObject({ status: 'completed' });
  }

  describe('9: connections without a token cannot exhaust the dispatcher', () => {
    it(`answers ${SLOW_BODIES} slow bodies without a token at once (401, closed) and keeps serving`, async () => {
      const slow: Raw[] = [];
      try {
        // Headers complete, a body announced and never sent: before the fix each held a descriptor for good.
        for (let i = 0; i < SLOW_BODIES; i += 100) {
          const batch = Array.from({ length: Math.min(100, SLOW_BODIES - i) }, () =>
            raw(dispatcher.url, `POST /v1/calls HTTP/1.1\r\nHost: ${hostPort}\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"name":`).catch(() => undefined),
          );
          for (const r of await Promise.all(batch)) if (r !== undefined) slow.push(r);
        }
        await until('every slow unauthenticated body to be answered and closed', () => slow.every((r) => r.isClosed()), { timeoutMs: 20_000, intervalMs: 100 });
        const answered = slow.filter((r) => r.received().startsWith('HTTP/1.1 401'));
        expect(answered.length).toBeGreaterThan(0);
        expect(answered[0]!.received()).toMatch(/\r\nconnection: close\r\n/i);
        await stillServing();
      } finally {
        for (const r of slow) r.socket.destroy();
      }
    }, 60_000);

    it(`evicts the oldest of more than ${MAX_UNAUTHENTICATED} unfinished requests with 503 + Retry-After, times out the rest, and keeps serving`, async () => {
      const stalled: Raw[] = [];
      try {
        // Headers that never end: a slowloris.
        for (let i = 0; i < MAX_UNAUTHENTICATED * 2; i += 50) {
          const batch = Array.from({ length: 50 }, () => raw(dispatcher.url, `GET /healthz HTTP/1.1\r\nHost: ${hostPort}\r\nX-Slow: `).catch(() => undefined));
          for (const r of await Promise.all(batch)) if (r !== undefined) stalled.push(r);
        }
        const evicted = await until('the oldest stalled connections to be answered 503', () => {
          const answered = stalled.filter((r) => r.received().startsWith('HTTP/1.1 503'));
          return answered.length > 0 && answered;
        });
        expect(evicted[0]!.received()).toMatch(/\r\nretry-after: \d+\r\n/i);
        expect(json(evicted[0]!.received().split('\r\n\r\n')[1] ?? '')).toMatchObject({ error: { code: 'UNAVAILABLE' } });
        await stillServing();
        // The headers timeout ends the rest.
        await until('every stalled connection to be closed', () => stalled.every((r) => r.isClosed()), { timeoutMs: 20_000, intervalMs: 100 });
      } finally {
        for (const r of stalled) r.socket.destroy();
      }
    }, 60_000);
  });

  describe('9b: a cold burst of real clients is not mistaken for a slowloris', () => {
    it(`serves ${MAX_UNAUTHENTICATED * 3} concurrent POST /mcp, each on a new connection with a valid token, without a 503`, async () => {
      // Its own dispatcher, with the default headers timeout (and so the default grace a new connection has to send its request).
      const cold = await fleet.dispatcher({ FORGE_DEV_MODE: '0', FORGE_MAX_UNAUTHENTICATED_CONNECTIONS: String(MAX_UNAUTHENTICATED) });
      const host = new URL(cold.url).host;
      const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' });
      const request = `POST /mcp HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${agent}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`;
      const answers = await Promise.all(Array.from({ length: MAX_UNAUTHENTICATED * 3 }, () => exchange(cold.url, request)));
      const statuses = new Map<number, number>();
      for (const a of answers) statuses.set(a.status, (statuses.get(a.status) ?? 0) + 1);
      expect(Object.fromEntries(statuses)).toEqual({ 200: MAX_UNAUTHENTICATED * 3 });
    }, 60_000);
  });

  describe('10: Host and Origin are checked on /v1 and /mcp', () => {
    const mcpCall = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'echo', arguments: { rebound: true } } });
    const post = (path: string, host: string, body: string, extra = '') =>
      exchange(
        dispatcher.url,
        `POST ${path} HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${agent}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n${extra}Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
      );

    it('refuses a foreign Host (DNS rebinding) on /mcp and /v1 with a typed error', async () => {
      for (const path of ['/mcp', '/v1/calls']) {
        const answer = await post(path, 'evil.example.com', path === '/mcp' ? mcpCall : JSON.stringify({ name: 'echo', arguments: {} }), 'Origin: http://evil.example.com\r\n');
        expect(answer.status, answer.body).toBe(421);
        expect(json(answer.body)).toMatchObject({ error: { code: 'HOST_NOT_ALLOWED' } });
      }
    });

    it('refuses a foreign Origin even with the right Host', async () => {
      const answer = await post('/v1/calls', hostPort, JSON.stringify({ name: 'echo', arguments: {} }), 'Origin: http://evil.example.com\r\n');
      expect(answer.status, answer.body).toBe(403);
      expect(json(answer.body)).toMatchObject({ error: { code: 'ORIGIN_NOT_ALLOWED' } });
    });

    it('serves loopback hosts with any port, and the same origin', async () => {
      const port = new URL(dispatcher.url).port;
      for (const host of [hostPort, `localhost:${port}`, `[::1]:${port}`]) {
        const answer = await post('/v1/calls?wait=10000', host, JSON.stringify({ name: 'echo', arguments: {} }), `Origin: http://${host}\r\n`);
        expect(answer.status, `${host}: ${answer.body}`).toBe(200);
      }
    });
  });

  describe('11: 401 answers carry a WWW-Authenticate challenge', () => {
    it('without a token, and with a refused one', async () => {
      const none = await fetch(`${dispatcher.url}/v1/tools`);
      expect(none.status).toBe(401);
      expect(none.headers.get('www-authenticate')).toBe('Bearer realm="forge-fleet"');
      const bad = await fetch(`${dispatcher.url}/mcp`, { method: 'POST', headers: { authorization: 'Bearer not.a.token', 'content-type': 'application/json' }, body: '{}' });
      expect(bad.status).toBe(401);
      expect(bad.headers.get('www-authenticate')).toMatch(/^Bearer realm="forge-fleet", error="invalid_token", error_description="[^"]+"$/);
    });
  });

  describe('12: bad input gets the documented error body, never a 500', () => {
    it('refuses audit times before 1970 (and other unreadable ones) with 400', async () => {
      for (const since of ['1969-12-31', '1969-12-31T23:59:59Z', '0000-01-01']) {
        const response = await fetch(`${dispatcher.url}/v1/audit?since=${since}`, { headers: { authorization: `Bearer ${admin}` } });
        expect(response.status, since).toBe(400);
        expect(await response.json()).toMatchObject({ error: { code: 'BAD_REQUEST' } });
      }
      const until1970 = await fetch(`${dispatcher.url}/v1/audit?until=1969-01-01`, { headers: { authorization: `Bearer ${admin}` } });
      expect(until1970.status).toBe(400);
    });

    it('answers 414, 431 and a Content-Length + Transfer-Encoding conflict with the error body', async () => {
      const long = await fetch(`${dispatcher.url}/v1/calls/${'a'.repeat(300)}`, { headers: { authorization: `Bearer ${agent}` } });
      expect(long.status).toBe(414);
      expect(await long.json()).toMatchObject({ error: { code: 'URI_TOO_LONG', message: expect.any(String) as string } });

      const big = await exchange(dispatcher.url, `GET /v1/tools HTTP/1.1\r\nHost: ${hostPort}\r\nX-Big: ${'b'.repeat(20_000)}\r\n\r\n`);
      expect(big.status).toBe(431);
      expect(big.headers['content-type']).toMatch(/^application\/json/);
      expect(json(big.body)).toMatchObject({ error: { code: 'HEADERS_TOO_LARGE' } });

      const smuggled = await exchange(dispatcher.url, `POST /v1/calls HTTP/1.1\r\nHost: ${hostPort}\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`);
      expect(smuggled.status).toBe(400);
      expect(json(smuggled.body)).toMatchObject({ error: { code: 'BAD_REQUEST', message: expect.stringMatching(/Transfer-Encoding/) as string } });
    });

    it('answers an NDJSON body on /v1/calls with 415 pointing at /v1/calls/stream, no stream internals', async () => {
      const response = await fetch(`${dispatcher.url}/v1/calls`, { method: 'POST', headers: { authorization: `Bearer ${agent}`, 'content-type': 'application/x-ndjson' }, body: '{"name":"echo"}\n' });
      const text = await response.text();
      expect(response.status).toBe(415);
      expect(text).not.toMatch(/_readableState|_events/);
      expect(json(text)).toMatchObject({ error: { code: 'UNSUPPORTED_MEDIA_TYPE', message: expect.stringMatching(/\/v1\/calls\/stream/) as string } });
    });
  });

  describe('13: a `__proto__` key gets the same answer on every entrance', () => {
    const poisoned = '{"id":"%ID%","name":"echo","arguments":{"a":{"__proto__":{"polluted":true}}}}';
    const headers = () => ({ authorization: `Bearer ${agent}`, 'content-type': 'application/json' });

    it('single, batch (failing alone) and stream refuse it with one code and message naming the key', async () => {
      const single = await fetch(`${dispatcher.url}/v1/calls`, { method: 'POST', headers: headers(), body: poisoned.replace('%ID%', crypto.randomUUID()) });
      expect(single.status).toBe(400);
      const singleError = ((await single.json()) as { error: { code: string; message: string } }).error;
      expect(singleError.code).toBe('BAD_REQUEST');
      expect(singleError.message).toMatch(/__proto__/);
      expect(singleError.message).not.toMatch(/not valid JSON/);

      const batch = await fetch(`${dispatcher.url}/v1/calls/batch?wait=10000`, {
        method: 'POST',
        headers: headers(),
        body: `{"calls":[${poisoned.replace('%ID%', crypto.randomUUID())},{"name":"echo","arguments":{"fine":true}}]}`,
      });
      expect(batch.status).toBe(200);
      const lines = (await batch.text()).trim().split('\n').map((l) => JSON.parse(l) as { index: number; status?: string; error?: { code: string; message: string } });
      expect(lines.find((l) => l.index === 0)?.error).toEqual(singleError);
      expect(lines.find((l) => l.index === 1)).toMatchObject({ status: 'completed' });

      const id = crypto.randomUUID();
      const stream = await fetch(`${dispatcher.url}/v1/calls/stream?wait=10000`, { method: 'POST', headers: { ...headers(), 'content-type': 'application/x-ndjson' }, body: `${poisoned.replace('%ID%', id)}\n` });
      const answers = (await stream.text()).split('\n').filter((l) => l.trim() !== '').map((l) => JSON.parse(l) as { id?: string; error?: unknown });
      expect(answers).toEqual([{ id, error: singleError }]);
    });
  });

  describe('13b: a number JSON cannot carry (1e400, which parses as Infinity) gets the same answer on every entrance', () => {
    const headers = () => ({ authorization: `Bearer ${agent}`, 'content-type': 'application/json' });
    const huge = (id: string) => `{"id":"${id}","name":"echo","arguments":{"a":{"list":[1,1e400]}}}`;

    it('single, batch (failing alone), stream, /mcp and FleetClient refuse it with BAD_REQUEST naming where it is; nothing runs', async () => {
      const single = await fetch(`${dispatcher.url}/v1/calls?wait=10000`, { method: 'POST', headers: headers(), body: huge(crypto.randomUUID()) });
      expect(single.status).toBe(400);
      const singleError = ((await single.json()) as { error: { code: string; message: string } }).error;
      expect(singleError.code).toBe('BAD_REQUEST');
      expect(singleError.message).toContain("number JSON cannot carry at 'a.list[1]' (it is Infinity");

      const batch = await fetch(`${dispatcher.url}/v1/calls/batch?wait=10000`, { method: 'POST', headers: headers(), body: `{"calls":[${huge(crypto.randomUUID())},{"name":"echo","arguments":{"fine":1e308}}]}` });
      const lines = (await batch.text()).trim().split('\n').map((l) => JSON.parse(l) as { index: number; status?: string; error?: { code: string; message: string } });
      expect(lines.find((l) => l.index === 0)?.error).toEqual(singleError);
      expect(lines.find((l) => l.index === 1)).toMatchObject({ status: 'completed' });

      const id = crypto.randomUUID();
      const stream = await fetch(`${dispatcher.url}/v1/calls/stream?wait=10000`, { method: 'POST', headers: { ...headers(), 'content-type': 'application/x-ndjson' }, body: `${huge(id)}\n` });
      const answers = (await stream.text()).split('\n').filter((l) => l.trim() !== '').map((l) => JSON.parse(l) as { id?: string; error?: unknown });
      expect(answers).toEqual([{ id, error: singleError }]);

      const mcp = await fetch(`${dispatcher.url}/mcp`, {
        method: 'POST',
        headers: { ...headers(), accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' },
        body: '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"a":{"list":[1,1e400]}}}}',
      });
      const mcpText = await mcp.text();
      const mcpJson = JSON.parse(mcpText.startsWith('{') ? mcpText : (mcpText.split('\n').find((l) => l.startsWith('data: '))?.slice(6) ?? '{}')) as { result?: { isError?: boolean; _meta?: Record<string, { code?: string; message?: string }> } };
      expect(mcpJson.result?.isError).toBe(true);
      expect(mcpJson.result?._meta?.['forge-fleet/error']).toMatchObject({ code: 'BAD_REQUEST', message: singleError.message });

      const client = new FleetClient({ url: dispatcher.url, token: agent });
      try {
        await expect(client.call('echo', { a: { list: [1, Infinity] } })).rejects.toMatchObject({ code: 'BAD_REQUEST', message: singleError.message });
      } finally {
        await client.close();
      }
    });

    it('arguments with several problems are refused naming the same first one by the dispatcher and by FleetClient', async () => {
      const client = new FleetClient({ url: dispatcher.url, token: agent });
      try {
        for (const text of ['{"__proto__":{"x":1},"a":1e400}', '{"a":1e400,"__proto__":{"x":1}}', '{"list":[{"constructor":{}}],"n":-1e400}']) {
          const sent = await fetch(`${dispatcher.url}/v1/calls?wait=10000`, { method: 'POST', headers: headers(), body: `{"name":"echo","arguments":${text}}` });
          expect(sent.status).toBe(400);
          const error = ((await sent.json()) as { error: { code: string; message: string } }).error;
          expect(error.code).toBe('BAD_REQUEST');
          // JSON.parse keeps '__proto__' an own key, as a body's arguments arrive at the dispatcher.
          await expect(client.call('echo', JSON.parse(text) as Record<string, unknown>)).rejects.toMatchObject({ code: 'BAD_REQUEST', message: error.message });
        }
        // Nesting past the dispatcher's depth before a prototype key: /v1 and /mcp both name the nesting.
        const deep = `{"a":${'{"d":'.repeat(40)}1${'}'.repeat(40)},"b":{"__proto__":1}}`;
        const sent = await fetch(`${dispatcher.url}/v1/calls?wait=10000`, { method: 'POST', headers: headers(), body: `{"name":"echo","arguments":${deep}}` });
        const error = ((await sent.json()) as { error: { code: string; message: string } }).error;
        expect(error.message).toMatch(/nest deeper than \d+ levels/);
        const mcp = await fetch(`${dispatcher.url}/mcp`, {
          method: 'POST',
          headers: { ...headers(), accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' },
          body: `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"echo","arguments":${deep}}}`,
        });
        const answered = (await mcp.json()) as { result?: { isError?: boolean; _meta?: Record<string, { code?: string; message?: string }> } };
        expect(answered.result?._meta?.['forge-fleet/error']).toMatchObject({ code: 'BAD_REQUEST', message: error.message });
      } finally {
        await client.close();
      }
    });
  });

  describe('14: tokens from the future are refused', () => {
    it('refuses a token issued a year ahead with a 401 saying so', async () => {
      const future = Math.floor(Date.now() / 1000) + 365 * 24 * 3600;
      const token = await new SignJWT({ role: 'agent', grants: [] })
        .setProtectedHeader({ alg: 'EdDSA' })
        .setSubject('time-traveller')
        .setAudience('forge-fleet')
        .setIssuedAt(future)
        .setExpirationTime(future + 3600)
        .sign(createPrivateKey(fleet.tokenKeys.privateKeyPem));
      const response = await fetch(`${dispatcher.url}/v1/tools`, { headers: { authorization: `Bearer ${token}` } });
      expect(response.status).toBe(401);
      expect(await response.json()).toMatchObject({ error: { code: 'UNAUTHENTICATED', message: expect.stringMatching(/issued in the future/) as string } });
    });
  });
});
