import type { ConfigInvalidError } from '@forge-fleet/shared';
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

  it('refuses a JSON setting of the wrong shape or with a bad tool pattern as CONFIG_INVALID, naming the variable, the place and the shape', () => {
    const problems = (env: Record<string, string>): readonly string[] => {
      try {
        parseDispatcherEnv({ ...dev, ...env });
      } catch (error) {
        expect(error).toMatchObject({ code: 'CONFIG_INVALID' });
        return (error as ConfigInvalidError).details['problems'] as string[];
      }
      throw new Error(`accepted ${JSON.stringify(env)}`);
    };
    const scopesShape = 'it takes a JSON object of task types to arrays of tool patterns (names, "prefix.*" or "*"), e.g. {"research": ["search.*", "clock"]}';
    expect(problems({ FORGE_SCOPES: '{"research":["search.*","bar_*"]}' })).toEqual([`FORGE_SCOPES.research.1: tool pattern "bar_*" is not an exact tool name, "prefix.*" or "*"; ${scopesShape}`]);
    expect(problems({ FORGE_SCOPES: '["search.*"]' })).toEqual([`FORGE_SCOPES: Invalid input: expected record, received array; ${scopesShape}`]);
    expect(problems({ FORGE_SCOPES: '{"research":"search.*"}' })).toEqual([`FORGE_SCOPES.research: Invalid input: expected array, received string; ${scopesShape}`]);
    // A key JavaScript objects drop (it sets the prototype): refused, not lost.
    expect(problems({ FORGE_SCOPES: '{"research":["clock"],"__proto__":["*"]}' })[0]).toMatch(/^FORGE_SCOPES\.__proto__: `__proto__` cannot be a name/);
    expect(problems({ FORGE_SCOPES: '{nope' })[0]).toMatch(/^FORGE_SCOPES: is not valid JSON \(.+\); it takes a JSON object/);
    expect(problems({ FORGE_DEFAULT_SCOPE: '["clock", "*.x"]' })).toEqual([
      'FORGE_DEFAULT_SCOPE.1: tool pattern "*.x" is not an exact tool name, "prefix.*" or "*"; it takes a JSON array of tool patterns (names, "prefix.*" or "*"), e.g. ["*"] or ["search.*", "clock"]',
    ]);
    expect(problems({ FORGE_DEFAULT_SCOPE: '"*"' })[0]).toMatch(/^FORGE_DEFAULT_SCOPE: Invalid input: expected array, received string; it takes a JSON array/);
    // Both at once: every problem is reported, each with its variable.
    expect(problems({ FORGE_SCOPES: '[]', FORGE_DEFAULT_SCOPE: '{}' }).map((p) => p.split(':')[0])).toEqual(['FORGE_SCOPES', 'FORGE_DEFAULT_SCOPE']);
  });

  it('reads the HTTP doors settings (defaults live in http/door-options.ts), lists comma-separated', () => {
    const unset = parseDispatcherEnv(dev);
    expect([unset.FORGE_HEADERS_TIMEOUT_MS, unset.FORGE_ALLOWED_HOSTS, unset.FORGE_TOKEN_CLOCK_SKEW_S]).toEqual([undefined, undefined, undefined]);
    const env = parseDispatcherEnv({ ...dev, FORGE_ALLOWED_HOSTS: 'fleet.internal, other:443', FORGE_MAX_CONNECTIONS: '100', FORGE_TOKEN_CLOCK_SKEW_S: '0', FORGE_BODY_TIMEOUT_MS: '' });
    expect(env).toMatchObject({ FORGE_ALLOWED_HOSTS: ['fleet.internal', 'other:443'], FORGE_MAX_CONNECTIONS: 100, FORGE_TOKEN_CLOCK_SKEW_S: 0 });
    expect(env.FORGE_BODY_TIMEOUT_MS).toBeUndefined();
    expect(() => parseDispatcherEnv({ ...dev, FORGE_MAX_CONNECTIONS: 'lots' })).toThrow(/FORGE_MAX_CONNECTIONS/);
  });
});
