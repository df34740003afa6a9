import { describe, expect, it } from 'vitest';
import { ApiKeys } from './approvals/policy.js';
import { parseDispatcherEnv } from './env.js';

describe('dispatcher environment', () => {
  it('has the documented defaults', () => {
    expect(parseDispatcherEnv({ REDIS_URL: 'redis://x' })).toMatchObject({
      PORT: 8080,
      HOST: '127.0.0.1',
      FORGE_APPROVAL: 'tier',
      FORGE_API_KEYS: {},
      FORGE_SCOPES: {},
      FORGE_DEFAULT_SCOPE: ['*'],
      FORGE_BODY_LIMIT_BYTES: 1_048_576,
    });
  });

  it('parses JSON settings and reports malformed ones by name', () => {
    const env = parseDispatcherEnv({ REDIS_URL: 'redis://x', FORGE_SCOPES: '{"research":["search.*"]}' });
    expect(env.FORGE_SCOPES).toEqual({ research: ['search.*'] });
    expect(() => parseDispatcherEnv({ REDIS_URL: 'redis://x', FORGE_SCOPES: '{nope' })).toThrow(/FORGE_SCOPES: is not valid JSON/);
    expect(() => parseDispatcherEnv({ REDIS_URL: 'redis://x', FORGE_API_KEYS: '{"short":{"subject":"a","tools":[]}}' })).toThrow(/at least 16/);
    expect(() => parseDispatcherEnv({ REDIS_URL: 'redis://x', PORT: 'eighty' })).toThrow(/PORT/);
  });
});

describe('API keys', () => {
  const keys = new ApiKeys({ ['k'.repeat(20)]: { subject: 'ops', tools: ['http_get'] } });

  it('maps a known bearer key to its grants, no header to anonymous', () => {
    expect(keys.authenticate(`Bearer ${'k'.repeat(20)}`)).toEqual({ subject: 'ops', tools: ['http_get'] });
    expect(keys.authenticate(undefined)).toBeUndefined();
  });

  it('refuses unknown keys and malformed headers with UNAUTHENTICATED', () => {
    expect(() => keys.authenticate(`Bearer ${'x'.repeat(20)}`)).toThrow(expect.objectContaining({ code: 'UNAUTHENTICATED' }) as Error);
    expect(() => keys.authenticate('Basic abc')).toThrow(/Bearer/);
  });
});
