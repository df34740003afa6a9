import { ToolDefinition } from '@forge-fleet/shared';
import { describe, expect, it } from 'vitest';
import { directPackOf, isDirectPack, packJson, packOf, parsePack } from './packs.js';

const definitions = [ToolDefinition.parse({ name: 'memory.read_graph', description: 'reads', parameters: { type: 'object' }, tier: 'host' })];

describe("a worker's own pack", () => {
  it('has the tools of its pack under an id of its worker, told apart from every pack of workers', () => {
    const pack = packOf(definitions);
    const own = directPackOf(pack, 'host-1-abc');
    expect(own.tools).toEqual(pack.tools);
    expect(own.id.startsWith(`${pack.id}.w`)).toBe(true);
    expect(directPackOf(pack, 'host-1-abd').id).not.toBe(own.id);
    expect(directPackOf(pack, 'host-1-abc').id).toBe(own.id);
    expect(isDirectPack(own.id)).toBe(true);
    expect(isDirectPack(pack.id)).toBe(false);
    // An operator's pack name can never be taken for one: its characters exclude the dot.
    expect(isDirectPack(packOf(definitions, 'ops-w0123456789abcdef').id)).toBe(false);
    expect(() => packOf(definitions, own.id)).toThrow(RangeError);
    expect(isDirectPack(directPackOf(packOf(definitions, 'ops'), 'x').id)).toBe(true);
  });

  it('reads back from the catalog, and nothing else with a dot does', () => {
    const own = directPackOf(packOf(definitions), 'w');
    expect(parsePack(own.id, packJson(own.tools))).toEqual(own);
    for (const id of ['a.b', `${own.id}x`, `x.w${'0'.repeat(15)}`, `.w${'0'.repeat(16)}`]) expect(parsePack(id, packJson(own.tools)), id).toBeUndefined();
  });
});
