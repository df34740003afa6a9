import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { FleetClient } from '@forge-fleet/client';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { fleetPerTest } from '../fixtures/fleet-per-test.js';
import { McpTestDir } from '../fixtures/mcp/servers-files.js';
import { until } from '../fixtures/wait.js';

/**
 * A server whose tool list changes while several workers serve it: each
 * worker's instances tell their own worker, and the fleet must end up
 * serving the new list, safety hints included, whichever worker hears first.
 */

/** A stdio server that lists the tools in the JSON file `LIST` (read at each tools/list), and tells its client when that file changes. */
const LISTING = String.raw`
const fs = require('node:fs');
const send = (m) => process.stdout.write(JSON.stringify({ jsonrpc: '2.0', ...m }) + '\n');
const list = () => JSON.parse(fs.readFileSync(process.env.LIST, 'utf8'));
fs.watchFile(process.env.LIST, { interval: 100 }, () => send({ method: 'notifications/tools/list_changed' }));
require('node:readline').createInterface({ input: process.stdin }).on('line', (line) => {
  const m = JSON.parse(line);
  if (m.method === 'initialize') send({ id: m.id, result: { protocolVersion: m.params.protocolVersion, capabilities: { tools: { listChanged: true } }, serverInfo: { name: 'listing', version: '1' } } });
  else if (m.method === 'tools/list') send({ id: m.id, result: { tools: list() } });
  else if (m.method === 'tools/call') send({ id: m.id, result: { content: [{ type: 'text', text: 'ran ' + m.params.name + ' in ' + process.pid }] } });
  else if (m.id !== undefined) send({ id: m.id, result: {} });
});
`;

describe('a tool list that changes under several workers', () => {
  const t = fleetPerTest();
  let mcp: McpTestDir;

  beforeEach(() => {
    mcp = new McpTestDir('mcp-list-changes');
  });

  afterEach(() => {
    mcp.remove();
  });

  it('is served as changed by every worker of the server, a destructive hint held for a person and a new tool served', async () => {
    const code = join(mcp.mkdir('code'), 'listing.cjs');
    writeFileSync(code, LISTING);
    const listFile = join(mcp.mkdir('list'), 'tools.json');
    writeFileSync(listFile, JSON.stringify([{ name: 'w', inputSchema: { type: 'object' }, annotations: { destructiveHint: false } }]));
    const servers = mcp.write({ dz: { command: process.execPath, args: [code], env: { LIST: listFile } } });
    // Two workers of one servers file: one pack, each with its own instance of the server.
    await t.fleet.worker({ tier: 'host', tools: false, mcp: servers });
    await t.fleet.worker({ tier: 'host', tools: false, mcp: servers });
    const { url } = await t.fleet.dispatcher({ FORGE_APPROVAL: 'auto' });
    t.client = new FleetClient({ url, timeoutMs: 20_000 });
    await until('dz.w in the catalog', async () => (await t.client!.tools()).some((tool) => tool.name === 'dz.w'));
    expect((await t.client.tools()).find((tool) => tool.name === 'dz.w')?.requiresConfirmation ?? false).toBe(false);

    // The server now calls `w` destructive, and lists a new tool: both instances tell their workers at once.
    writeFileSync(listFile, JSON.stringify([{ name: 'w', inputSchema: { type: 'object' }, annotations: { destructiveHint: true } }, { name: 'n3', inputSchema: { type: 'object' } }]));
    await until('the changed list in the catalog', async () => {
      const tools = await t.client!.tools();
      return tools.find((tool) => tool.name === 'dz.w')?.requiresConfirmation === true && tools.some((tool) => tool.name === 'dz.n3');
    });
    expect(await t.client.call('dz.n3', {})).toMatchObject({ isError: false });
    // The changed hint holds: the call waits for a person rather than running.
    const held = await t.client.submit('dz.w', {}, { waitMs: 500 });
    expect(held.status).toBe('awaiting_approval');
  });
});
