import { randomUUID } from 'node:crypto';
import { FleetClient } from '@forge-fleet/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { McpTestDir } from '../fixtures/mcp/servers-files.js';
import { TestFleet } from '../fixtures/fleet.js';
import { until } from '../fixtures/wait.js';

/**
 * `timeoutMs` bounds one run of an MCP server's tool. A tool the file flags
 * `retryable` runs again after a timeout, as after any failure that may pass,
 * and the error its last run ends with says how many runs it had: each may
 * have taken effect.
 */
describe("an MCP server's retryable tool that times out", () => {
  const fleet = new TestFleet();
  let dir: McpTestDir;
  let client: FleetClient;

  beforeAll(async () => {
    dir = new McpTestDir('mcp-retries');
    const servers = dir.write({
      py: dir.python('py.runs', { tools: { wait: { retryable: true, timeoutMs: 300 } } }),
      once: dir.python('once.runs', { tools: { wait: { timeoutMs: 300 } } }),
    });
    await fleet.worker({ tier: 'host', tools: false, mcp: servers });
    const dispatcher = await fleet.dispatcher({ FORGE_DEV_MODE: '0' });
    client = new FleetClient({ url: dispatcher.url, token: await fleet.token({ subject: 'retries', grants: ['py.*', 'once.*'] }), timeoutMs: 20_000 });
    await until('the tools to be served', async () => (await client.tools()).filter((t) => t.name.endsWith('.wait')).length === 2, { timeoutMs: 20_000 });
  });

  afterAll(async () => {
    await client?.close();
    await fleet.stopAll();
    dir?.remove();
  });

  it('runs it FORGE_RETRY_ATTEMPTS times, each cut at timeoutMs, and its error counts the runs in details.attempts', async () => {
    const key = randomUUID();
    const result = await client.call('py.wait', { ms: 10_000, key });
    expect(result.error, JSON.stringify(result)).toMatchObject({ code: 'EXECUTION_TIMEOUT', details: { timeoutMs: 300, attempts: 3 } });
    expect(dir.runs('py.runs').filter((r) => r.key === key && r.event === 'start')).toHaveLength(3);
  });

  it('runs a tool not flagged retryable once, and says nothing of attempts', async () => {
    const key = randomUUID();
    const result = await client.call('once.wait', { ms: 10_000, key });
    expect(result.error, JSON.stringify(result)).toMatchObject({ code: 'EXECUTION_TIMEOUT', retryable: false });
    expect(result.error?.details).not.toHaveProperty('attempts');
    expect(dir.runs('once.runs').filter((r) => r.key === key && r.event === 'start')).toHaveLength(1);
  });
});
