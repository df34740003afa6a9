import { stableStringify } from '@forge-fleet/shared';
import type { Catalog, CatalogEntry, CatalogSnapshot } from '@forge-fleet/store';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { CatalogView } from './catalog-view.js';

/** A host tool whose schema (100 properties, named after the tool) compiles in milliseconds, never from a cache. */
function entry(name: string): CatalogEntry {
  const properties = Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`${name}_${i}`, { type: 'string', maxLength: i + 1 }]));
  const definition = { name, description: '', tier: 'host', parameters: { type: 'object', properties } };
  return { lane: 'host', json: stableStringify(definition), liveWorkers: 1, packs: [] };
}

/** A catalog that answers one snapshot: what CatalogView reads of the store. */
function catalogOf(entries: readonly CatalogEntry[]): Catalog {
  const snapshot: CatalogSnapshot = {
    lanes: ['host'],
    entries: new Map(entries.map((e) => [(JSON.parse(e.json) as { name: string }).name, e])),
    ambiguous: new Map(),
    packs: [],
    skipped: [],
  };
  return { snapshot: () => Promise.resolve(snapshot) } as unknown as Catalog;
}

describe('CatalogView', () => {
  it('gives the event loop back between the definitions it compiles, and serves every one once read', async () => {
    const names = Array.from({ length: 40 }, (_, i) => `tool_${i}`);
    const view = new CatalogView(catalogOf(names.map(entry)), 'test', 60_000, pino({ level: 'silent' }));
    // A turn of the loop that keeps asking for the next: it runs only when the read lets it.
    let turns = 0;
    let reading = true;
    const tick = (): void => {
      if (!reading) return;
      turns += 1;
      setImmediate(tick);
    };
    const read = view.refresh();
    setImmediate(tick);
    await read;
    reading = false;
    // 40 schemas of 100 properties each hold the loop far past one slice in all: it was given back along the way.
    expect(turns).toBeGreaterThan(2);
    expect(view.list().map((d) => d.name).sort()).toEqual([...names].sort());
  });
});
