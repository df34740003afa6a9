import { defineTool } from '@forge-fleet/shared';
import { describe, expect, it } from 'vitest';
import { parseWorkerArgs } from './cli.js';
import { parseWorkerEnv } from './env.js';
import { selectTools } from './tools/load.js';

describe('forge-worker command line and environment', () => {
  it('parses the documented flags with defaults', () => {
    expect(parseWorkerArgs(['--tier', 'platform', '--tools', 'x.ts'])).toEqual({ tier: 'platform', tools: 'x.ts', 'strict-sandbox': false });
    expect(parseWorkerArgs(['--tier', 'platform', '--tools', 'x.ts', '--strict-sandbox'])['strict-sandbox']).toBe(true);
    expect(parseWorkerArgs(['--tier', 'platform', '--tools', 'x.ts', '--sandbox-isolation', 'call'])['sandbox-isolation']).toBe('call');
    expect(parseWorkerArgs(['--tier', 'host', '--pool', 'gh', '--mcp', 'servers.yaml'])).toMatchObject({ tier: 'host', pool: 'gh', mcp: 'servers.yaml' });
    expect(parseWorkerArgs(['--tier', 'host', '--pool', 'gh', '--mcp', 'servers.yaml']).tools).toBeUndefined();
    expect(parseWorkerEnv({ REDIS_URL: 'redis://x', FORGE_SANDBOX_ISOLATION: 'call', FORGE_SANDBOX_MAX_PROCESSES: '8' })).toMatchObject({ FORGE_SANDBOX_ISOLATION: 'call', FORGE_SANDBOX_MAX_PROCESSES: 8 });
    expect(() => parseWorkerEnv({ REDIS_URL: 'redis://x', FORGE_SANDBOX_ISOLATION: 'process' })).toThrow(/FORGE_SANDBOX_ISOLATION/);
    expect(parseWorkerArgs(['--tier', 'external', '--pool', 'payments', '--tools', 'x.ts', '--concurrency', '4'])).toMatchObject({ tier: 'host', pool: 'payments', concurrency: 4 });
  });

  it.each([
    [['--tools', 'x.ts'], /tier/],
    [['--tier', 'gpu', '--tools', 'x.ts'], /tier/],
    [['--tier', 'platform', '--tools', 'x.ts', '--pool', 'p'], /--pool applies to --tier host only/],
    [['--tier', 'platform', '--tools', 'x.ts', '--concurrency', '0'], /concurrency/],
    [['--tier', 'platform', '--tools', 'x.ts', '--bogus'], /bogus/],
    [['--tier', 'platform', '--tools', 'x.ts', '--sandbox-isolation', 'process'], /sandbox-isolation/],
    [['--tier', 'platform'], /--tools <module>, --mcp <servers file>, or both/],
    [['--tier', 'platform', '--mcp', ''], /mcp/],
  ])('refuses %j with CONFIG_INVALID naming the problem', (argv, problem) => {
    expect(() => parseWorkerArgs(argv)).toThrow(expect.objectContaining({ code: 'CONFIG_INVALID', message: expect.stringMatching(problem) as string }) as Error);
  });

  it('requires REDIS_URL and keeps the lock at most 30 s', () => {
    expect(() => parseWorkerEnv({})).toThrow(/REDIS_URL/);
    expect(() => parseWorkerEnv({ REDIS_URL: 'redis://x', FORGE_LOCK_DURATION_MS: '60000' })).toThrow(/30000/);
    const env = parseWorkerEnv({ REDIS_URL: 'redis://x' });
    expect(env).toMatchObject({ FORGE_PREFIX: 'forge', FORGE_LOCK_DURATION_MS: 15000, FORGE_RESULT_RETENTION_MS: 86_400_000 });
    expect(Object.isFrozen(env)).toBe(true);
  });
});

describe('selectTools', () => {
  const tools = [
    defineTool({ name: 'a', tier: 'platform', handler: () => '' }),
    defineTool({ name: 'b', tier: 'host', handler: () => '' }),
    defineTool({ name: 'c', tier: 'host', pool: 'payments', handler: () => '' }),
    defineTool({ name: 'd', tier: 'embedded' }),
  ];

  it('serves the tools of its own tier and pool only', () => {
    expect(selectTools(tools, 'platform', undefined).map((t) => t.definition.name)).toEqual(['a']);
    expect(selectTools(tools, 'host', undefined).map((t) => t.definition.name)).toEqual(['b']);
    expect(selectTools(tools, 'host', 'payments').map((t) => t.definition.name)).toEqual(['c']);
  });

  it('refuses to serve nothing, listing what the module has', () => {
    expect(() => selectTools(tools, 'host', 'nobody')).toThrow(/no host-tier tools for pool nobody.*a \(platform\)/);
  });

  it('refuses tools without a handler', () => {
    expect(() => selectTools(tools, 'embedded', undefined)).toThrow(/without a handler cannot be served: d/);
  });
});
