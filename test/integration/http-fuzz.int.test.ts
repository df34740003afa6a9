import { generateTokenKeys, mintToken } from '@forge-fleet/shared';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FleetProcess, TestFleet } from '../fixtures/fleet.js';

/**
 * Property: whatever arrives at the HTTP API — malformed or huge bodies, deep
 * nesting, prototype keys, odd content types, random or damaged tokens, random
 * arguments and query strings — the dispatcher answers below 500 with a typed
 * error (`{ error: { code, message } }`) or a well-formed success, and keeps
 * running: a normal call works afterwards.
 */

const BODY_LIMIT = 64 * 1024;
const RUNS = 200;

/** Printable ASCII: what an HTTP client can put in a header at all. */
const headerText = (maxLength = 64) => fc.string({ maxLength }).map((s) => s.replace(/[^\x20-\x7e]/g, ''));
const PROTO_KEYS = ['__proto__', 'constructor', 'prototype'] as const;

/** JSON-ish values, sometimes with prototype keys inside. */
const jsonValue: fc.Arbitrary<unknown> = fc.letrec<{ value: unknown }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.jsonValue({ maxDepth: 2 }),
    fc.array(tie('value'), { maxLength: 4 }),
    fc.dictionary(fc.oneof({ arbitrary: fc.string({ maxLength: 8 }), weight: 8 }, fc.constantFrom(...PROTO_KEYS)), tie('value'), { maxKeys: 4 }),
  ),
})).value;

/** Arguments as raw JSON text, so `__proto__` arrives as a key rather than being eaten by an object literal. */
const argumentsText = fc.oneof(
  fc.dictionary(fc.string({ maxLength: 8 }), jsonValue, { maxKeys: 5 }).map((o) => JSON.stringify(o)),
  fc.tuple(fc.constantFrom(...PROTO_KEYS), jsonValue).map(([k, v]) => `{"${k}":${JSON.stringify(v) ?? 'null'}}`),
  fc.integer({ min: 20, max: 3000 }).map((depth) => `{"deep":${'['.repeat(depth)}1${']'.repeat(depth)}}`),
  fc.jsonValue().map((v) => JSON.stringify(v) ?? 'null'),
);

const callText = fc
  .record({
    id: fc.oneof(fc.constant(undefined), fc.uuid(), fc.string({ maxLength: 140 })),
    name: fc.oneof(fc.constantFrom('echo', 'count', 'confirm_first', 'no_such_tool', ''), fc.string({ maxLength: 130 })),
    args: fc.option(argumentsText, { nil: undefined }),
    // Mostly well-formed calls, so most reach admission; sometimes an unknown field.
    extra: fc.oneof({ arbitrary: fc.constant(undefined), weight: 6 }, fc.tuple(fc.string({ maxLength: 8 }), jsonValue)),
  })
  .map(({ id, name, args, extra }) => {
    const fields = [`"name":${JSON.stringify(name)}`];
    if (id !== undefined) fields.push(`"id":${JSON.stringify(id)}`);
    if (args !== undefined) fields.push(`"arguments":${args}`);
    if (extra !== undefined) fields.push(`${JSON.stringify(extra[0])}:${JSON.stringify(extra[1]) ?? 'null'}`);
    return `{${fields.join(',')}}`;
  });

const body = fc.oneof(
  { arbitrary: callText, weight: 4 },
  { arbitrary: fc.array(callText, { maxLength: 5 }).map((calls) => `{"calls":[${calls.join(',')}]}`), weight: 3 },
  fc.json(),
  fc.string({ maxLength: 200 }),
  fc.constantFrom('', '{', '[]', 'null', '{"calls":[]}', '{"__proto__":{"polluted":true}}', '{"constructor":{"prototype":{"polluted":true}}}', '\u0000', '{"name":"echo","arguments":{}}'.repeat(2)),
  fc.integer({ min: 20, max: 50_000 }).map((depth) => `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`),
  fc.integer({ min: BODY_LIMIT - 64, max: BODY_LIMIT * 2 }).map((size) => `{"name":"echo","arguments":{"s":"${'x'.repeat(size)}"}}`),
);

const contentType = fc.option(
  fc.oneof(
    { arbitrary: fc.constant('application/json'), weight: 6 },
    fc.constantFrom('application/json', 'application/json; charset=utf-8', 'application/json; charset=utf-16', 'text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/x-ndjson', '*/*'),
    headerText(40),
  ),
  { nil: undefined },
);

/** Times as the audit filters take them, many before 1970 (Redis refuses negative stream IDs: once a 500). */
const instant = fc.oneof(
  fc.date({ min: new Date(-62_167_219_200_000), max: new Date(8_640_000_000_000_000), noInvalidDate: true }).chain((d) => fc.constantFrom(d.toISOString(), d.toISOString().slice(0, 10), String(d.getTime()))),
  fc.constantFrom('1969-12-31', '1969-12-31T23:59:59Z', '0000-01-01', '-1', '0', '999999999999999', '2024-02-30', '+275760-09-13'),
);

const query = fc.oneof(
  fc.constant(''),
  fc.record({ since: fc.option(instant, { nil: undefined }), until: fc.option(instant, { nil: undefined }) }).map(
    ({ since, until }) => `?${new URLSearchParams({ ...(since === undefined ? {} : { since }), ...(until === undefined ? {} : { until }) }).toString()}`,
  ),
  fc.constantFrom('?wait=0', '?wait=50', '?wait=-1', '?wait=abc', '?wait=1e3', '?wait=999999', '?wait=1&wait=2', '?__proto__[x]=1', '?constructor=1'),
  fc.dictionary(fc.constantFrom('callId', 'caller', 'tool', 'decision', 'category', 'since', 'until', 'limit', 'wait', 'x'), fc.string({ maxLength: 20 }), { maxKeys: 4 }).map(
    (q) => `?${new URLSearchParams(Object.entries(q).map(([k, v]): [string, string] => [k, k === 'wait' ? '0' : v])).toString()}`,
  ),
);

describe('the HTTP API under arbitrary input', () => {
  const fleet = new TestFleet();
  let dispatcher: FleetProcess & { url: string };
  let exited = false;
  let tokens: { agent: string; admin: string; foreign: string; expired: string; otherAudience: string };

  beforeAll(async () => {
    await fleet.worker({ tier: 'platform' });
    dispatcher = await fleet.dispatcher({ FORGE_DEV_MODE: '0', FORGE_BODY_LIMIT_BYTES: String(BODY_LIMIT), FORGE_SCOPES: JSON.stringify({ research: ['echo'] }) });
    void dispatcher.exited.then(() => (exited = true));
    const foreignKeys = generateTokenKeys();
    tokens = {
      agent: await fleet.token({ subject: 'fuzz-agent' }),
      admin: await fleet.token({ subject: 'fuzz-admin', role: 'admin' }),
      foreign: await mintToken(foreignKeys.privateKeyPem, { subject: 'intruder', role: 'admin' }),
      expired: await fleet.token({ subject: 'late', expiresInSeconds: -60 }),
      otherAudience: await fleet.token({ subject: 'elsewhere', audience: 'another-fleet' }),
    };
  });

  afterAll(() => fleet.stopAll());

  const authorization = () =>
    fc.option(
      fc.oneof(
        // Mostly a valid token, so most requests reach the routes behind authentication.
        { arbitrary: fc.constantFrom(tokens.agent, tokens.admin).map((t) => `Bearer ${t}`), weight: 10 },
        fc.constantFrom(tokens.foreign, tokens.expired, tokens.otherAudience).map((t) => `Bearer ${t}`),
        fc.tuple(fc.constantFrom(tokens.agent, tokens.admin), fc.nat()).map(([t, n]) => `Bearer ${t.slice(0, n % t.length)}`),
        fc.tuple(fc.constantFrom(tokens.agent, tokens.admin), fc.nat(), fc.constantFrom('A', '_', '.', '-', '0')).map(([t, n, c]) => {
          const i = n % t.length;
          return `Bearer ${t.slice(0, i)}${t[i] === c ? 'B' : c}${t.slice(i + 1)}`;
        }),
        fc.constantFrom(tokens.agent).map((t) => t.split('.').reverse().join('.')).map((t) => `Bearer ${t}`),
        headerText().map((s) => `Bearer ${s}`),
        headerText(),
        fc.constantFrom('Bearer', 'Bearer ', 'Basic dXNlcjpwYXNz', `bearer ${'a'.repeat(8000)}`, 'Bearer a.b.c', 'Bearer ..', 'Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.'),
      ),
      { nil: undefined },
    );

  const request = () =>
    fc.oneof(
      fc.record({ method: fc.constant('POST'), path: fc.constantFrom('/v1/calls', '/v1/calls/batch'), query, body, contentType, authorization: authorization() }),
      fc.record({
        method: fc.constant('GET'),
        path: fc.oneof(
          { arbitrary: fc.constantFrom('/v1/tools', '/v1/audit'), weight: 2 },
          fc.oneof(fc.uuid(), fc.string({ maxLength: 200 }), fc.string({ minLength: 90, maxLength: 400 })).map((id) => `/v1/calls/${encodeURIComponent(id)}`),
        ),
        query,
        body: fc.constant(undefined),
        contentType,
        authorization: authorization(),
      }),
      fc.record({ method: fc.constant('POST'), path: fc.oneof(fc.uuid(), fc.string({ maxLength: 40 })).map((id) => `/v1/calls/${encodeURIComponent(id)}/cancel`), query: fc.constant(''), body: fc.option(body, { nil: undefined }), contentType, authorization: authorization() }),
    );

  /** `value` is an object whose `fields` are all strings. */
  function expectStrings(value: unknown, fields: readonly string[], context: string): void {
    expect(typeof value, context).toBe('object');
    for (const field of fields) expect(typeof (value as Record<string, unknown>)[field], `${field} in ${context}`).toBe('string');
  }

  /** The answer is below 500 and typed: an error body with code and message, or the route's success shape. */
  function checkAnswer(path: string, status: number, type: string, text: string): void {
    expect(status, text.slice(0, 500)).toBeLessThan(500);
    // No framework's own body, no internals of a stream object (an NDJSON body on a JSON route once listed them).
    expect(text).not.toMatch(/_readableState|_events|"statusCode":/);
    if (type.startsWith('application/x-ndjson')) {
      expect(status).toBe(200);
      for (const line of text.trim().split('\n').filter((l) => l !== '')) {
        const item = JSON.parse(line) as Record<string, unknown>;
        expect(typeof item['index']).toBe('number');
        if ('error' in item) expectStrings(item['error'], ['code', 'message'], line);
        else expectStrings(item, ['id', 'status'], line);
      }
      return;
    }
    expect(type, `${path}: ${text.slice(0, 200)}`).toMatch(/^application\/json/);
    const answer = JSON.parse(text) as Record<string, unknown>;
    if (status >= 400) {
      expectStrings(answer['error'], ['code', 'message'], text.slice(0, 500));
      expect((answer['error'] as { code: string }).code).toMatch(/^[A-Z_]+$/);
    } else if (path === '/v1/tools') expect(answer['tools']).toBeInstanceOf(Array);
    else if (path === '/v1/audit') expect(answer['entries']).toBeInstanceOf(Array);
    else expectStrings(answer, ['id', 'status'], text.slice(0, 500));
  }

  it(`answers ${RUNS} arbitrary requests below 500 with typed bodies, and keeps working`, async () => {
    await fc.assert(
      fc.asyncProperty(request(), async (r) => {
        const headers: Record<string, string> = {};
        if (r.authorization !== undefined) headers['authorization'] = r.authorization;
        if (r.contentType !== undefined && r.body !== undefined) headers['content-type'] = r.contentType;
        const response = await fetch(`${dispatcher.url}${r.path}${r.query}`, { method: r.method, headers, ...(r.body === undefined ? {} : { body: r.body }) });
        checkAnswer(r.path, response.status, response.headers.get('content-type') ?? '', await response.text());
        expect(exited).toBe(false);
      }),
      { numRuns: RUNS, seed: Number(process.env['FUZZ_SEED'] ?? Date.now() % 2 ** 31), interruptAfterTimeLimit: 25_000 },
    );
    expect(exited).toBe(false);
    expect(({} as Record<string, unknown>)['polluted']).toBeUndefined();
    const normal = await fetch(`${dispatcher.url}/v1/calls?wait=10000`, {
      method: 'POST',
      headers: { authorization: `Bearer ${tokens.agent}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'echo', arguments: { still: 'works' } }),
    });
    expect(await normal.json()).toMatchObject({ status: 'completed', result: { structuredContent: { echo: { still: 'works' } } } });
  }, 60_000);
});
