import { describe, expect, it } from 'vitest';
import { MemoryRiskSignalQueue } from './risk.js';
import { DEFAULT_SCOPE_NAME, ScopeRegistry } from './scopes.js';
import { ToolScope } from './tool-scope.js';

describe('ToolScope', () => {
  it('matches exact names and prefix patterns', () => {
    const scope = ToolScope.allow(['clock', 'fs.*']);
    expect(scope.admits('clock')).toBe(true);
    expect(scope.admits('fs.read')).toBe(true);
    expect(scope.admits('fs.dir.list')).toBe(true);
    expect(scope.admits('fs')).toBe(false);
    expect(scope.admits('fsx.read')).toBe(false);
    expect(scope.admits('clockwork')).toBe(false);
    expect(scope.isFull).toBe(false);
  });

  it('an empty allow list admits nothing; "*" admits everything', () => {
    expect(ToolScope.allow([]).admits('x')).toBe(false);
    expect(ToolScope.allow(['*']).admits('x')).toBe(true);
  });

  it('refuses malformed patterns', () => {
    for (const bad of ['a*', '*.x', 'a.*.b', '', 'with space']) {
      expect(() => ToolScope.allow([bad]), bad).toThrow(expect.objectContaining({ code: 'INVALID_DEFINITION' }) as Error);
    }
  });

  it('filters lists keeping their order, and is immutable', () => {
    const scope = ToolScope.allow(['b', 'a']);
    expect(scope.filter([{ name: 'a' }, { name: 'c' }, { name: 'b' }])).toEqual([{ name: 'a' }, { name: 'b' }]);
    expect(Object.isFrozen(scope)).toBe(true);
    expect(JSON.stringify(scope)).toBe('{"patterns":["b","a"]}');
    expect(JSON.stringify(ToolScope.full())).toBe('{"patterns":null}');
  });
});

describe('ScopeRegistry', () => {
  it('resolves no task type to the default scope, a known one to its scope, an unknown one to undefined', () => {
    const scopes = new ScopeRegistry(ToolScope.allow(['clock'])).register('research', ToolScope.allow(['search.*']));
    expect(scopes.resolve(undefined)?.name).toBe(DEFAULT_SCOPE_NAME);
    expect(scopes.resolve(undefined)?.scope.admits('clock')).toBe(true);
    expect(scopes.resolve('research')?.scope.admits('search.web')).toBe(true);
    expect(scopes.resolve('unknown')).toBeUndefined();
    expect(scopes.taskTypes()).toEqual(['research']);
    expect(scopes.has('research')).toBe(true);
    expect(scopes.get('nope')).toBeUndefined();
  });

  it('defaults to the full scope', () => {
    expect(new ScopeRegistry().defaultScope.scope.isFull).toBe(true);
  });
});

describe('MemoryRiskSignalQueue', () => {
  it('keeps the newest signals within its capacity and counts what it dropped', () => {
    const queue = new MemoryRiskSignalQueue(2);
    for (const tool of ['a', 'b', 'c']) queue.push({ kind: 'out_of_scope', at: '', callId: tool, tool, scope: 's' });
    expect(queue.signals.map((s) => s.tool)).toEqual(['b', 'c']);
    expect(queue.dropped).toBe(1);
    expect(queue.drain()).toHaveLength(2);
    expect(queue.signals).toEqual([]);
  });
});
