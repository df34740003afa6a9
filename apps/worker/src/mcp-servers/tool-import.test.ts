import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MAX_SCHEMA_DEPTH, MAX_SUBSCHEMAS } from '@forge-fleet/shared';
import type { Tool as McpTool } from '@modelcontextprotocol/sdk/types.js';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import type { McpServerPool } from './server-pool.js';
import { loadServersFile } from './servers-file.js';
import { importTools, MAX_LISTING_SUBSCHEMAS } from './tool-import.js';
import { checkedTool } from './upstream-instance.js';

function server(...more: string[]) {
  const dir = mkdtempSync(join(tmpdir(), 'tool-import-'));
  writeFileSync(join(dir, 'servers.yaml'), ['version: 1', 'servers:', '  big:', '    command: node', ...more].join('\n'));
  const [config] = loadServersFile(join(dir, 'servers.yaml'), {}).servers;
  if (config === undefined) throw new Error('no server in the file');
  return config;
}

/** An object schema of `n` string properties: `n + 1` subschemas with the root. */
function wide(n: number): McpTool['inputSchema'] {
  return { type: 'object', properties: Object.fromEntries(Array.from({ length: n }, (_, i) => [`p${i}`, { type: 'string' }])) };
}

function nested(levels: number): McpTool['inputSchema'] {
  let schema: Record<string, unknown> = { type: 'string' };
  for (let i = 1; i < levels; i++) schema = { type: 'object', properties: { x: schema } };
  return schema as McpTool['inputSchema'];
}

// The executors are made, never called: no pool is needed.
const noPool = {} as McpServerPool;
const lane = { tier: 'host', pool: undefined } as const;
const log = pino({ level: 'silent' });

describe('importTools bounds what a server makes the fleet compile', () => {
  it('leaves out a tool whose schema is too large or too deep, naming the bound and where, and serves the rest', async () => {
    const listed: McpTool[] = [
      { name: 'wide', inputSchema: wide(MAX_SUBSCHEMAS + 500) },
      { name: 'deep', inputSchema: nested(MAX_SCHEMA_DEPTH + 50) },
      { name: 'deep_output', inputSchema: wide(1), outputSchema: nested(MAX_SCHEMA_DEPTH + 1) },
      { name: 'fine', inputSchema: wide(10) },
    ];
    const imported = await importTools(server(), { tools: listed, refused: [] }, lane, noPool, log);
    expect(imported.tools.map((t) => t.definition.name)).toEqual(['big.fine']);
    expect(imported.skipped).toEqual([
      { tool: 'wide', reason: expect.stringMatching(new RegExp(`invalid at '/parameters': .*more than ${MAX_SUBSCHEMAS} subschemas`)) as string },
      { tool: 'deep', reason: expect.stringMatching(new RegExp(`invalid at '/parameters(/properties/x){${MAX_SCHEMA_DEPTH}}': .*more than ${MAX_SCHEMA_DEPTH} levels`)) as string },
      { tool: 'deep_output', reason: expect.stringContaining(`more than ${MAX_SCHEMA_DEPTH} levels`) as string },
    ]);
  });

  it(`serves a list's tools up to ${MAX_LISTING_SUBSCHEMAS} subschemas in all, in the list's order, and leaves out those past it`, async () => {
    // Each tool just within the bound for one schema; one schema, so compiled once, but counted for every tool.
    const each = MAX_SUBSCHEMAS - 1;
    const fit = Math.floor(MAX_LISTING_SUBSCHEMAS / (each + 1));
    const schema = wide(each - 1);
    const listed: McpTool[] = Array.from({ length: fit + 2 }, (_, i) => ({ name: `t${i}`, inputSchema: schema }));
    const imported = await importTools(server(), { tools: listed, refused: [] }, lane, noPool, log);
    expect(imported.tools).toHaveLength(fit);
    expect(imported.skipped.map((s) => s.tool)).toEqual([`t${fit}`, `t${fit + 1}`]);
    expect(imported.skipped[0]?.reason).toContain(`at most ${MAX_LISTING_SUBSCHEMAS} in all`);
  });

  it('gives the event loop back between the tools whose schemas it compiles', async () => {
    // 40 schemas of 100 properties, each its own (no compile is cached), hold the loop far past one slice in all.
    const listed: McpTool[] = Array.from({ length: 40 }, (_, t) => ({
      name: `t${t}`,
      inputSchema: { type: 'object', properties: Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`t${t}_p${i}`, { type: 'string', maxLength: i + 1 }])) },
    }));
    let turns = 0;
    let importing = true;
    const tick = (): void => {
      if (!importing) return;
      turns += 1;
      setImmediate(tick);
    };
    const imported = importTools(server(), { tools: listed, refused: [] }, lane, noPool, log);
    setImmediate(tick);
    expect((await imported).tools).toHaveLength(40);
    importing = false;
    expect(turns).toBeGreaterThan(2);
  });
});

describe("importTools keeps what the server said about a tool's effects", () => {
  it('gives every tool an annotations object, empty when the server sent none, so listings take MCP defaults rather than the fleet vouching for the tool', async () => {
    const listed: McpTool[] = [
      { name: 'plain', inputSchema: wide(1) },
      { name: 'hinted', inputSchema: wide(1), annotations: { destructiveHint: true } },
    ];
    const imported = await importTools(server(), { tools: listed, refused: [] }, lane, noPool, log);
    expect(imported.tools.map((t) => [t.definition.name, t.definition.annotations])).toEqual([
      ['big.plain', {}],
      ['big.hinted', { destructiveHint: true }],
    ]);
  });
});

describe('importTools and the settings of the file', () => {
  it("warns of each tool the file sets that the server does not list (a misspelt name would protect nothing), and of no other", async () => {
    const warnings: unknown[] = [];
    const spy = { warn: (fields: unknown) => warnings.push(fields) };
    // read_file is listed, though not as a tool the fleet can serve: a setting for it is no misspelling.
    const config = server('    tools:', '      write_file: { requiresConfirmation: true }', '      writefile_typo: { requiresConfirmation: true }', '      read_file: { retryable: true }');
    const imported = await importTools(config, { tools: [{ name: 'write_file', inputSchema: { type: 'object' } }], refused: [{ tool: 'read_file', reason: 'not an MCP tool' }] }, lane, noPool, spy as never);
    expect(imported.tools.map((t) => t.definition)).toEqual([expect.objectContaining({ name: 'big.write_file', requiresConfirmation: true })]);
    expect(warnings).toEqual([{ server: 'big', tool: 'writefile_typo' }]);
    expect(imported.skipped).toEqual([{ tool: 'read_file', reason: 'not an MCP tool' }]);
  });
});

describe('checkedTool: one entry of a list, not the list', () => {
  it.each([
    ['an input schema of another type', { name: 'a', inputSchema: { type: 'string' } }, 'a', 'its inputSchema is not an object schema'],
    ['an input schema without a type', { name: 'b', inputSchema: { properties: { x: { type: 'string' } } } }, 'b', 'its inputSchema is not an object schema'],
    ['no input schema', { name: 'c' }, 'c', 'its inputSchema is not an object schema'],
    ['an output schema of another type', { name: 'd', inputSchema: { type: 'object' }, outputSchema: { type: 'array' } }, 'd', 'its outputSchema is not an object schema'],
    ['a hint that is not a boolean', { name: 'e', inputSchema: { type: 'object' }, annotations: { readOnlyHint: 'yes' } }, 'e', 'it is not an MCP tool: annotations.readOnlyHint: '],
    ['a name that is not a string', { name: 42, inputSchema: { type: 'object' } }, '(an entry whose name is 42)', 'it is not an MCP tool: name: '],
    ['no name', { inputSchema: { type: 'object' } }, '(an entry whose name is missing)', 'it is not an MCP tool: name: '],
    ['not an object', 'a string', '(an entry whose name is missing)', 'it is not an MCP tool: the entry: '],
  ])('refuses %s, naming the entry and what is wrong', (_what, entry, tool, reason) => {
    const checked = checkedTool(entry);
    expect(checked).toEqual({ skipped: { tool, reason: expect.stringContaining(reason) as string } });
  });

  it('takes a tool of MCP shape as it is', () => {
    const entry = { name: 'ok', title: 'OK', inputSchema: { type: 'object', properties: { x: { type: 'string' } } }, annotations: { readOnlyHint: true }, execution: { taskSupport: 'required' } };
    expect(checkedTool(entry)).toEqual({ tool: entry });
  });
});
