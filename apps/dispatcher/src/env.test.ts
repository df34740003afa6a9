import { describe, expect, it } from 'vitest';
import { parseDispatcherEnv } from './env.js';

const dev = { REDIS_URL: 'redis://x', FORGE_DEV_MODE: '1' };

describe('dispatcher environment', () => {
  it('has the documented defaults', () => {
    expect(parseDispatcherEnv(dev)).toMatchObject({
      PORT: 8080,
      HOST: '127.0.0.1',
      FORGE_APPROVAL: 'tier',
      FORGE_TOKEN_AUDIENCE: 'forge-fleet',
      FORGE_DEV_MODE: true,
      FORGE_SCOPES: {},
      FORGE_DEFAULT_SCOPE: ['*'],
      FORGE_BODY_LIMIT_BYTES: 1_048_576,
      FORGE_MAX_ARGUMENT_BYTES: 262_144,
      FORGE_MAX_JSON_DEPTH: 32,
    });
    expect(parseDispatcherEnv(dev).FORGE_AUDIT_REDIS_URL).toBeUndefined();
  });

  it('needs a token key unless dev mode is on, and says how to get one', () => {
    expect(() => parseDispatcherEnv({ REDIS_URL: 'redis://x' })).toThrow(/FORGE_TOKEN_PUBLIC_KEY.*forge keys init/);
    expect(parseDispatcherEnv({ REDIS_URL: 'redis://x', FORGE_TOKEN_PUBLIC_KEY_FILE: '/keys/token.pub' }).FORGE_DEV_MODE).toBe(false);
  });

  it('parses JSON settings and reports malformed ones by name', () => {
    const env = parseDispatcherEnv({ ...dev, FORGE_SCOPES: '{"research":["search.*"]}' });
    expect(env.FORGE_SCOPES).toEqual({ research: ['search.*'] });
    expect(() => parseDispatcherEnv({ ...dev, FORGE_SCOPES: '{nope' })).toThrow(/FORGE_SCOPES: is not valid JSON/);
    expect(() => parseDispatcherEnv({ ...dev, PORT: 'eighty' })).toThrow(/PORT/);
    expect(() => parseDispatcherEnv({ ...dev, FORGE_DEV_MODE: 'yes' })).toThrow(/FORGE_DEV_MODE/);
  });
});
