import { ToolScope } from '@forge-fleet/shared';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registrationOnlyDeps } from '../../test/fixtures/registration-only-deps.js';
import { type AppDeps, buildApp } from '../app.js';
import type { Authenticator, Caller } from '../auth/authenticator.js';
import { mediaTypeOf } from './media-type.js';

describe('mediaTypeOf', () => {
  it('is the media type sent, lower-cased, without parameters, bounded; "none" when no type was sent', () => {
    expect(mediaTypeOf('Text/Plain; charset=utf-8')).toBe('text/plain');
    expect(mediaTypeOf('  application/xml ')).toBe('application/xml');
    expect(mediaTypeOf(undefined)).toBe('none');
    expect(mediaTypeOf('')).toBe('none');
    expect(mediaTypeOf(`application/${'x'.repeat(5000)}`).length).toBeLessThanOrEqual(128);
  });
});

/**
 * Media types the routes do not read, through the whole app (doors, parsers,
 * error handling): the answer names the type sent and is in the route's own
 * error format — JSON-RPC on /mcp, the error body on /v1. No service is
 * touched: a refused type never reaches one.
 */
describe('a body in a media type the route does not read', () => {
  const caller: Caller = { subject: 'unit', role: 'agent', scope: { name: 'unit', scope: ToolScope.allow(['*']) }, authorization: undefined };
  const auth = { caller: () => Promise.resolve(caller) } as unknown as Authenticator;
  let app: FastifyInstance;

  beforeAll(async () => {
    const base = registrationOnlyDeps();
    const deps = new Proxy(base, { get: (target, key: string) => (key === 'auth' ? auth : target[key as keyof AppDeps]) });
    app = buildApp(deps);
    await app.ready();
  });
  afterAll(() => app.close());

  const post = (url: string, contentType: string | undefined, payload = '{"name":"echo","arguments":{}}') =>
    app.inject({ method: 'POST', url, payload, headers: { authorization: 'Bearer ok', accept: 'application/json, text/event-stream', ...(contentType === undefined ? {} : { 'content-type': contentType }) } });

  const REFUSED: readonly [sent: string | undefined, reported: string][] = [
    ['text/plain', 'text/plain'],
    ['text/plain; charset=utf-8', 'text/plain'],
    ['application/x-ndjson', 'application/x-ndjson'],
    ['application/x-www-form-urlencoded', 'application/x-www-form-urlencoded'],
    ['Application/XML', 'application/xml'],
    ['application/json-patch+json', 'application/json-patch+json'],
    [undefined, 'none'],
  ];

  it.each(REFUSED)('/mcp answers %s with a JSON-RPC error (415) naming the type sent', async (sent, reported) => {
    const response = await post('/mcp', sent, '{"jsonrpc":"2.0","id":1,"method":"tools/list"}');
    expect(response.statusCode).toBe(415);
    const body = response.json<{ jsonrpc: string; id: unknown; error: { code: number; message: string; data: { contentType: string } } }>();
    expect(body).toMatchObject({ jsonrpc: '2.0', id: null, error: { code: -32000, data: { code: 'UNSUPPORTED_MEDIA_TYPE', contentType: reported } } });
    expect(body.error.message).toContain(`'${reported}'`);
    expect(body.error.message).toContain('application/json');
    expect(body.error.message).not.toContain('/v1');
  });

  it('/mcp bounds the type it reports', async () => {
    const response = await post('/mcp', `application/${'x'.repeat(2000)}`);
    expect(response.statusCode).toBe(415);
    expect(response.json<{ error: { data: { contentType: string } } }>().error.data.contentType.length).toBeLessThanOrEqual(128);
  });

  const V1_ROUTES = ['/v1/calls', '/v1/calls/batch', '/v1/approvals/c-1'];
  const V1_REFUSED = REFUSED.filter(([sent]) => sent !== 'application/x-ndjson');

  it.each(V1_ROUTES.flatMap((route) => V1_REFUSED.map(([sent, reported]) => [route, sent, reported] as const)))('%s answers %s with 415 UNSUPPORTED_MEDIA_TYPE naming the type sent', async (route, sent, reported) => {
    const response = await post(route, sent);
    expect(response.statusCode).toBe(415);
    expect(response.json()).toMatchObject({ error: { code: 'UNSUPPORTED_MEDIA_TYPE', contentType: reported, retryable: false, message: expect.stringContaining(`'${reported}'`) as string } });
  });

  it('names the type sent for a call stream sent where JSON is read, and for JSON sent to the stream route', async () => {
    for (const route of ['/v1/calls', '/v1/calls/batch', '/v1/approvals/c-1']) {
      const response = await post(route, 'application/x-ndjson');
      expect(response.statusCode, route).toBe(415);
      expect(response.json(), route).toMatchObject({ error: { code: 'UNSUPPORTED_MEDIA_TYPE', contentType: 'application/x-ndjson', message: expect.stringContaining('/v1/calls/stream') as string } });
    }
    for (const [sent, reported] of [['application/json; charset=utf-8', 'application/json'], ['text/plain', 'text/plain']] as const) {
      const response = await post('/v1/calls/stream', sent);
      expect(response.statusCode, sent).toBe(415);
      expect(response.json(), sent).toMatchObject({ error: { code: 'UNSUPPORTED_MEDIA_TYPE', contentType: reported, message: expect.stringContaining('application/x-ndjson') as string } });
    }
  });

  it('/v1 bounds the type it reports', async () => {
    const response = await post('/v1/calls', `application/${'x'.repeat(2000)}`);
    expect(response.statusCode).toBe(415);
    const reported = response.json<{ error: { contentType: string } }>().error.contentType;
    expect(reported.length).toBeLessThanOrEqual(128);
    expect(reported).toMatch(/^application\/x+$/);
  });
});
