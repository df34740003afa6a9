import { describe, expect, it } from 'vitest';
import { ErrorCode } from '../errors/codes.js';
import { isFleetError } from '../errors/fleet-error.js';
import { ToolRegistry } from './registry.js';
import { defineTool, type Tool } from './tool.js';

const tool = (name: string, tier: 'platform' | 'host' | 'embedded' = 'platform'): Tool => defineTool({ name, tier, handler: () => 'ok' });

function codeOf(fn: () => unknown): string {
  try {
    fn();
  } catch (error) {
    if (isFleetError(error)) return error.code;
    throw error;
  }
  return 'nothing thrown';
}

describe('ToolRegistry', () => {
  it('starts empty', () => {
    const registry = new ToolRegistry();
    expect(registry.isEmpty()).toBe(true);
    expect(registry.size).toBe(0);
    expect(registry.list()).toEqual([]);
  });

  it('counts what is registered', () => {
    const registry = new ToolRegistry().register(defineTool({ name: 'echo', description: 'Echo back the input', tier: 'embedded', handler: (a) => JSON.stringify(a) }));
    expect(registry.size).toBe(1);
    expect(registry.isEmpty()).toBe(false);
  });

  it('rejects a duplicate name with REGISTRY_ERROR and keeps the first tool', () => {
    const registry = new ToolRegistry();
    const first = tool('clock');
    registry.register(first);
    expect(codeOf(() => registry.register(tool('clock', 'host')))).toBe(ErrorCode.REGISTRY_ERROR);
    expect(registry.get('clock')?.definition).toBe(first.definition);
  });

  it('finds a tool only after it is registered', () => {
    const registry = new ToolRegistry();
    expect(registry.get('clock')).toBeUndefined();
    registry.register(tool('clock'));
    expect(registry.get('clock')?.definition.name).toBe('clock');
    expect(registry.get('clock')?.executor.name).toBe('clock');
  });

  it('lists definitions', () => {
    const registry = new ToolRegistry().register(tool('t1'));
    expect(registry.list()).toHaveLength(1);
  });

  it('lists in name order whatever the registration order', () => {
    const a = new ToolRegistry().registerAll(['zeta', 'alpha', 'mid'].map((n) => tool(n)));
    const b = new ToolRegistry().registerAll(['mid', 'zeta', 'alpha'].map((n) => tool(n)));
    expect(a.names()).toEqual(['alpha', 'mid', 'zeta']);
    expect(b.list()).toEqual(a.list());
    a.register(tool('beta'));
    expect(a.names()).toEqual(['alpha', 'beta', 'mid', 'zeta']);
  });

  it('gives serialisable copies of the definitions', () => {
    const registry = new ToolRegistry().register(tool('t1'));
    const defs = registry.definitions();
    expect(defs).toHaveLength(1);
    expect(defs[0]?.name).toBe('t1');
    expect(JSON.parse(JSON.stringify(defs))).toEqual(defs);
    defs[0]!.description = 'changed';
    expect(registry.get('t1')?.definition.description).toBe('');
  });

  it('removes a tool once', () => {
    const registry = new ToolRegistry().register(tool('t1'));
    expect(registry.remove('t1')?.definition.name).toBe('t1');
    expect(registry.isEmpty()).toBe(true);
    expect(registry.remove('t1')).toBeUndefined();
  });

  it('tells whether a name is registered', () => {
    const registry = new ToolRegistry();
    expect(registry.has('clock')).toBe(false);
    registry.register(tool('clock'));
    expect(registry.has('clock')).toBe(true);
    expect(registry.has('other')).toBe(false);
  });

  it('refuses a tool without an executor', () => {
    expect(codeOf(() => new ToolRegistry().register(defineTool({ name: 'bare' })))).toBe(ErrorCode.REGISTRY_ERROR);
  });

  it('refuses registration and removal once frozen, with a message that says why', () => {
    const registry = new ToolRegistry().register(tool('a')).freeze();
    expect(registry.isFrozen).toBe(true);
    try {
      registry.register(tool('b'));
      expect.unreachable();
    } catch (error) {
      expect(isFleetError(error) && error.code).toBe(ErrorCode.REGISTRY_ERROR);
      expect((error as Error).message).toContain('frozen');
    }
    expect(codeOf(() => registry.remove('a'))).toBe(ErrorCode.REGISTRY_ERROR);
    expect(registry.has('a')).toBe(true);
  });

  it('require() names the known tools when one is missing', () => {
    const registry = new ToolRegistry().register(tool('clock'));
    try {
      registry.require('get_weather');
      expect.unreachable();
    } catch (error) {
      expect(isFleetError(error) && error.code).toBe(ErrorCode.TOOL_NOT_FOUND);
      expect((error as Error).message).toContain('get_weather');
      expect((error as Error).message).toContain('not found');
      expect((error as Error).message).toContain('clock');
    }
  });

  it('refuses a hand-built definition whose schema cannot be run safely, with INVALID_DEFINITION', () => {
    const good = tool('hand_built');
    // JSON-Schema-Test-Suite, draft2020-12 ref.json "URN ref with nested pointer ref": ajv overflows its stack compiling it.
    const urn = 'urn:uuid:deadbeef-4321-ffff-ffff-1234feebdaed';
    const parameters = { type: 'object', $ref: urn, $defs: { foo: { $id: urn, $defs: { bar: { type: 'string' } }, $ref: '#/$defs/bar' } } };
    const handBuilt: Tool = { definition: { ...good.definition, parameters }, executor: good.executor };
    const registry = new ToolRegistry();
    expect(() => registry.register(handBuilt)).toThrow(/overflows its stack compiling it/);
    expect(codeOf(() => registry.register(handBuilt))).toBe(ErrorCode.INVALID_DEFINITION);
    expect(registry.has('hand_built')).toBe(false);
  });
});
