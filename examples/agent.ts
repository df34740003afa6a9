/**
 * An example agent: talks to a running fleet (`npm start`) through the
 * TypeScript client and calls tools of every tier, then shows what refusals
 * look like. Run: `npm run demo`.
 *
 * Reads FORGE_URL and FORGE_TOKEN (and FORGE_LIMITED_TOKEN, a token without
 * Host-tier grants), or the dev.json that `npm start` writes (in
 * FORGE_STATE_DIR, default .forge/).
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { FleetClient } from '@forge-fleet/client';
import { isFleetError, type ToolResult } from '@forge-fleet/shared';

function settings(): { url: string; token: string | undefined; limitedToken: string | undefined } {
  const file = join(process.env.FORGE_STATE_DIR ?? '.forge', 'dev.json');
  const dev = existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as { url?: string; token?: string; limitedToken?: string }) : {};
  const url = process.env.FORGE_URL ?? dev.url;
  if (url === undefined) {
    process.stderr.write('No fleet found: start one with `npm start` (or set FORGE_URL).\n');
    process.exit(1);
  }
  return { url, token: process.env.FORGE_TOKEN ?? dev.token, limitedToken: process.env.FORGE_LIMITED_TOKEN ?? dev.limitedToken };
}

const { url, token, limitedToken } = settings();
const agent = new FleetClient({ url, ...(token === undefined ? {} : { token }) });
const limited = new FleetClient({ url, ...(limitedToken === undefined ? {} : { token: limitedToken }) });

const line = (label: string, text: string): void => void process.stdout.write(`${label.padEnd(30)} ${text}\n`);
const show = (result: ToolResult): string => (result.isError ? `error ${result.error?.code ?? ''}: ${result.content}` : result.content);

async function attempt(label: string, run: () => Promise<ToolResult>): Promise<void> {
  try {
    line(label, show(await run()));
  } catch (error) {
    line(label, isFleetError(error) ? `refused ${error.code} (HTTP ${error.httpStatus}): ${error.message}` : String(error));
  }
}

try {
  const tools = await agent.tools();
  line('tools', tools.map((t) => `${t.name} [${t.tier}]`).join(', '));
  await attempt('platform  clock', () => agent.call('clock'));
  await attempt('embedded  echo', () => agent.call('echo', { text: 'hello, fleet' }));
  await attempt('embedded  wasm_add', () => agent.call('wasm_add', { a: 2, b: 40 }));
  await attempt('embedded  word_count (WASI)', () => agent.call('word_count', { text: 'tools at fleet scale' }));
  await attempt('host      http_get', () => agent.call('http_get', { url: `${url}/healthz` }));
  await attempt('refused   bad arguments', () => agent.call('wasm_add', { a: 'two', b: 40 }));
  await attempt('refused   host, no grant', () => limited.call('http_get', { url: `${url}/healthz` }));
  await attempt('refused   unknown tool', () => agent.call('teleport'));
  const id = `demo-${Date.now()}`;
  const [first, again] = await Promise.all([agent.call('clock', {}, { id }), agent.call('clock', {}, { id })]);
  line('idempotent id', first.content === again.content ? `same call, same result: ${first.content}` : 'DIFFERENT results');
} finally {
  await Promise.all([agent.close(), limited.close()]);
}
