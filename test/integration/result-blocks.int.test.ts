import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FleetClient } from '@forge-fleet/client';
import { type CallView, type ContentBlock, lineReader, type ToolResult } from '@forge-fleet/shared';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AUDIO, BLOB, BLOCKS, IMAGE, MAX_RESULT_BYTES, STRUCTURED } from '../fixtures/block-tools.js';
import { type FleetProcess, ROOT, TestFleet } from '../fixtures/fleet.js';

const BLOCK_TOOLS = join(ROOT, 'test', 'fixtures', 'block-tools.ts');
const FORGE_BIN = join(ROOT, 'apps', 'cli', 'bin', 'forge.js');
/** Both tiers that run handlers differently: `platform` in a sandbox process, `host` in the worker. */
const TIERS = ['platform', 'host'] as const;
/** What `content` says for {@link BLOCKS}: the text blocks' text, for clients that read only text. */
const TEXT = 'here is the chart\nand its sources ✓';

/** The binary payloads decoded again: equal blocks could still hide a re-encoding that equal bytes cannot. */
function expectBytesOf(blocks: readonly unknown[] | undefined): void {
  const [, image, audio, , , , blob] = (blocks ?? []) as { data?: string; resource?: { blob?: string } }[];
  expect(Buffer.from(image?.data ?? '', 'base64').equals(IMAGE)).toBe(true);
  expect(Buffer.from(audio?.data ?? '', 'base64').equals(AUDIO)).toBe(true);
  expect(Buffer.from(blob?.resource?.blob ?? '', 'base64').equals(BLOB)).toBe(true);
}

function expectEveryBlock(result: ToolResult | undefined): void {
  expect(result).toMatchObject({ isError: false, content: TEXT, structuredContent: STRUCTURED });
  expect(result?.blocks).toEqual(BLOCKS);
  expectBytesOf(result?.blocks);
}

/**
 * MCP content blocks end to end: handlers return images, audio, resource
 * links and embedded resources (through the sandbox's pipe for the platform
 * tool, in the worker for the host one), and every way out of the fleet —
 * `POST /v1/calls`, the stored record, the NDJSON stream, `FleetClient`, the
 * CLI and `/mcp` with the official client — gives each block as the tool gave
 * it; a bad block is a typed error, and blocks count toward the size limit.
 */
describe('content blocks from a tool to every caller', () => {
  const fleet = new TestFleet();
  const stateDir = mkdtempSync(join(tmpdir(), 'forge-blocks-'));
  let url: string;
  let token: string;
  let client: FleetClient;
  let mcp: Client;
  let workers: FleetProcess[];

  beforeAll(async () => {
    const env = { FORGE_MAX_RESULT_BYTES: String(MAX_RESULT_BYTES) };
    workers = await Promise.all([
      // The sandbox on (TestFleet turns it off by default): the platform tool's blocks cross the sandbox pipe.
      fleet.worker({ tier: 'platform', tools: BLOCK_TOOLS, env: { ...env, FORGE_SANDBOX: 'on', FORGE_SANDBOX_SIZE: '1' } }),
      fleet.worker({ tier: 'host', tools: BLOCK_TOOLS, env }),
    ]);
    ({ url } = await fleet.dispatcher({ FORGE_DEV_MODE: '0' }));
    token = await fleet.token({ subject: 'blocks', grants: ['host_blocks', 'host_bad_block', 'host_big_image', 'host_pid'] });
    client = new FleetClient({ url, token });
    mcp = new Client({ name: 'forge-fleet-tests', version: '0.0.0' });
    await mcp.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
  });

  afterAll(async () => {
    await mcp?.close();
    await client?.close();
    await fleet.stopAll();
    rmSync(stateDir, { recursive: true, force: true });
  });

  const post = async (path: string, body: unknown): Promise<{ status: number; json: CallView }> => {
    const response = await request(`${url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` }, body: JSON.stringify(body) });
    return { status: response.statusCode, json: (await response.body.json()) as CallView };
  };

  const forge = (args: readonly string[]) =>
    new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
      const env: NodeJS.ProcessEnv = { ...process.env, FORGE_STATE_DIR: stateDir, FORGE_URL: url, FORGE_TOKEN: token };
      const proc = spawn(process.execPath, ['--conditions=forge-source', '--import', 'tsx', FORGE_BIN, ...args], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      proc.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
      proc.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      proc.once('close', (code) => resolve({ code, stdout, stderr }));
    });

  it('runs the platform tools in a sandbox process and the host tools in their worker', async () => {
    const [platform, host] = workers;
    expect((await client.call('platform_pid', {})).structuredContent?.pid).not.toBe(platform?.pid);
    expect((await client.call('host_pid', {})).structuredContent?.pid).toBe(host?.pid);
  });

  describe.each(TIERS)('a %s tool', (tier) => {
    const tool = `${tier}_blocks`;

    it('POST /v1/calls?wait gives every block, byte-exact, and the stored record keeps them', async () => {
      const { status, json } = await post('/v1/calls?wait=30000', { id: `http-${randomUUID()}`, name: tool, arguments: {} });
      expect(status, JSON.stringify(json)).toBe(200);
      expect(json.status).toBe('completed');
      expectEveryBlock(json.result);
      // A fresh read is served from the call's record in Redis, not from the worker's reply.
      const stored = await request(`${url}/v1/calls/${encodeURIComponent(json.id)}`, { headers: { authorization: `Bearer ${token}` } });
      expectEveryBlock(((await stored.body.json()) as CallView).result);
    });

    it('the NDJSON stream gives every block on its answer line', async () => {
      const id = `stream-${randomUUID()}`;
      const response = await request(`${url}/v1/calls/stream?wait=30000`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-ndjson', authorization: `Bearer ${token}` },
        body: `${JSON.stringify({ id, name: tool, arguments: {} })}\n`,
      });
      expect(response.statusCode).toBe(200);
      const lines: (CallView & { line?: number })[] = [];
      const read = lineReader((line) => lines.push(JSON.parse(line) as CallView));
      for await (const chunk of response.body) read(chunk as Buffer);
      const answer = lines.find((l) => l.id === id && l.status === 'completed');
      expect(answer, JSON.stringify(lines.map((l) => l.status))).toBeDefined();
      expectEveryBlock(answer?.result);
    });

    it('FleetClient resolves to the result with every block', async () => {
      expectEveryBlock(await client.call(tool, {}, { timeoutMs: 30_000 }));
    });

    it('forge call prints the structured content the blocks came with, as pretty JSON, and --json keeps the blocks', async () => {
      // A line per block is for results without structured content (apps/cli/src/output.test.ts).
      const human = await forge(['call', tool, '{}', '--wait']);
      expect(human.code, human.stderr).toBe(0);
      expect(human.stdout).toBe(`${JSON.stringify(STRUCTURED, null, 2)}\n`);
      const json = await forge(['call', tool, '{}', '--wait', '--json']);
      expect(json.code, json.stderr).toBe(0);
      expectEveryBlock((JSON.parse(json.stdout) as CallView).result);
    });

    it('/mcp tools/call gives the blocks as MCP content, exactly as the tool gave them, with structuredContent', async () => {
      const result = await mcp.callTool({ name: tool, arguments: {} }, undefined, { timeout: 30_000 });
      expect(result.isError).toBe(false);
      expect(result.content as ContentBlock[]).toEqual(BLOCKS);
      expect(result.structuredContent).toEqual(STRUCTURED);
      expectBytesOf(result.content as unknown[]);
    });

    it('an invalid block fails the call with EXECUTION_FAILED, naming the block, on every way out', async () => {
      const bad = `${tier}_bad_block`;
      const result = await client.call(bad, {}, { timeoutMs: 30_000 });
      expect(result).toMatchObject({ isError: true, error: { code: 'EXECUTION_FAILED' } });
      expect(result.content).toContain("content block 1 (image) is not a valid MCP content block at 'data': must be base64");
      expect(result.blocks).toBeUndefined();
      const viaMcp = await mcp.callTool({ name: bad, arguments: {} }, undefined, { timeout: 30_000 });
      expect(viaMcp.isError).toBe(true);
      expect(viaMcp._meta?.['forge-fleet/error']).toMatchObject({ code: 'EXECUTION_FAILED' });
      expect(viaMcp.content).toEqual([{ type: 'text', text: result.content }]);
    });

    it('blocks count toward FORGE_MAX_RESULT_BYTES: an oversize image ends RESOURCE_LIMIT', async () => {
      const result = await client.call(`${tier}_big_image`, {}, { timeoutMs: 30_000 });
      expect(result).toMatchObject({ isError: true, error: { code: 'RESOURCE_LIMIT', details: { limit: 'output' } } });
      expect(result.content).toContain('FORGE_MAX_RESULT_BYTES');
      expect(result.blocks).toBeUndefined();
    });
  });
});
