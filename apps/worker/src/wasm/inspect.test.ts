import { describe, expect, it } from 'vitest';
import { buildFixture } from '../../test/fixtures/wasm/build.js';
import { inspectMemory, memoryProblem } from './inspect.js';

describe('inspectMemory', () => {
  it('reads a defined memory with its maximum', async () => {
    expect(inspectMemory(await buildFixture('grow'))).toEqual({ defined: [{ minPages: 1, maxPages: 64, shared: false, memory64: false }], imported: [] });
  });

  it('reads a memory without a maximum', async () => {
    expect(inspectMemory(await buildFixture('unbounded')).defined).toEqual([{ minPages: 1, maxPages: undefined, shared: false, memory64: false }]);
  });

  it('rejects bytes that are not WebAssembly', () => {
    expect(() => inspectMemory(new TextEncoder().encode('not wasm at all'))).toThrow(/bad magic/);
  });
});

describe('memoryProblem', () => {
  const memory = (maxPages: number | undefined) => ({ defined: [{ minPages: 1, maxPages, shared: false, memory64: false }], imported: [] });

  it('accepts a maximum at the cap', () => {
    expect(memoryProblem(memory(64), 64)).toBeUndefined();
  });

  it('refuses a maximum above the cap, no maximum, imported or missing memories', () => {
    expect(memoryProblem(memory(65), 64)).toMatch(/above the cap of 64 pages/);
    expect(memoryProblem(memory(undefined), 64)).toMatch(/no maximum/);
    expect(memoryProblem({ defined: [], imported: [{ minPages: 1, maxPages: 2, shared: false, memory64: false }] }, 64)).toMatch(/imports its memory/);
    expect(memoryProblem({ defined: [], imported: [] }, 64)).toMatch(/defines no memory/);
  });
});
