import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_MESSAGE_BYTES } from '../src/mcp-servers/answer-lines.js';
import { findLaunchTools } from '../src/mcp-servers/launch-command.js';
import { McpServerPool } from '../src/mcp-servers/server-pool.js';
import { probeIsolation } from '../src/sandbox/probe.js';
import { failureOf } from './fixtures/fleet-failure.js';
import { SecretValue } from '../src/mcp-servers/secret-value.js';
import { McpToolExecutor } from '../src/mcp-servers/mcp-tool-executor.js';
import { pino } from 'pino';

// An HTTP upstream that answers without end (a JSON body, an SSE event, an error body) must cost the worker
// one failed call, not its memory: the worker reads at most one message's bound of each and hangs up.
const FLOOD = fileURLToPath(new URL('./fixtures/mcp-flood-upstream.mjs', import.meta.url));

/** What the upstream may have written before it saw the worker hang up: the bound, and what sockets and pipes hold on the way. */
const WRITTEN_AT_MOST = MAX_MESSAGE_BYTES + 48 * 1024 * 1024;

let upstream: ChildProcess;
let pool: McpServerPool;

async function floods(): Promise<number[]> {
  const result = await pool.call({ tool: 'floods', arguments: {} });
  return (result.structuredContent as { bytes: number[] }).bytes;
}

beforeAll(async () => {
  upstream = spawn(process.execPath, [FLOOD], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise<number>((resolve, reject) => {
    upstream.once('exit', (code) => reject(new Error(`the upstream exited (${code}) before listening`)));
    if (upstream.stdout === null) throw new Error('no stdout');
    createInterface({ input: upstream.stdout }).once('line', (line) => resolve((JSON.parse(line) as { port: number }).port));
  });
  const tools = findLaunchTools(probeIsolation(), process.env.PATH ?? '');
  // Far below the test's timeout: a flood the worker kept reading would end as a timeout, not as the bound.
  pool = new McpServerPool({ server: 'flood', launch: { url: `http://127.0.0.1:${port}/mcp` }, instances: { min: 1, max: 1 }, callTimeoutMs: 10_000 }, tools);
  await pool.start();
});

afterAll(async () => {
  await pool?.close();
  upstream?.kill('SIGKILL');
});

describe('an HTTP upstream whose answer does not end', () => {
  it('fails only that call, RESOURCE_LIMIT, when its JSON answer passes the bound, and the session serves on', async () => {
    const session = pool.status().instances[0]?.id;
    const failure = await failureOf(pool.call({ tool: 'flood-json', arguments: {} }));
    expect(failure).toMatchObject({ code: 'RESOURCE_LIMIT' });
    expect(failure.message).toContain("MCP server 'flood' answered with more than");
    expect(failure.message).toContain('the worker');
    const [written] = await floods();
    expect(written).toBeGreaterThan(MAX_MESSAGE_BYTES);
    expect(written).toBeLessThan(WRITTEN_AT_MOST);
    expect(await pool.call({ tool: 'echo', arguments: { n: 1 } })).toMatchObject({ content: [{ type: 'text', text: 'echo {"n":1}' }] });
    expect(pool.status().instances[0]?.id).toBe(session);
  });

  it('fails a call at once, EXECUTION_FAILED, when its answer is neither a result nor an error (JSON or SSE), or a JSON-RPC error -32000; the session serves on', async () => {
    const session = pool.status().instances[0]?.id;
    // The pool's timeout is 10 s: the SDK dropped such an event, and the call waited for it; a JSON body failed at
    // once, with the schema's raw text as its message.
    for (const tool of ['null-sse', 'null-json']) {
      const failure = await failureOf(pool.call({ tool, arguments: {} }));
      expect(failure).toMatchObject({ code: 'EXECUTION_FAILED' });
      expect(failure.message).toContain("MCP server 'flood' answered the call with neither a result nor an error (its result is null, not an object)");
    }
    // One whose length is declared passes unread (not copied on the way), and the SDK's schema refuses it.
    const sized = await failureOf(pool.call({ tool: 'null-sized', arguments: {} }));
    expect(sized).toMatchObject({ code: 'EXECUTION_FAILED' });
    expect(sized.message).toContain("MCP server 'flood' answered the call with neither a result nor an error (it is not a JSON-RPC message: ");
    const failure = await failureOf(pool.call({ tool: 'error-32000', arguments: {} }));
    expect(failure).toMatchObject({ code: 'EXECUTION_FAILED', details: { mcpCode: -32000 } });
    expect(failure.message).toContain('the upstream of the upstream failed');
    expect(await pool.call({ tool: 'echo', arguments: { n: 3 } })).toMatchObject({ content: [{ type: 'text', text: 'echo {"n":3}' }] });
    expect(pool.status().instances[0]?.id).toBe(session);
  });

  it('fails only that call when one event of its SSE answer passes the bound', async () => {
    const failure = await failureOf(pool.call({ tool: 'flood-sse', arguments: {} }));
    expect(failure).toMatchObject({ code: 'RESOURCE_LIMIT' });
    expect(failure.message).toContain(`over the ${MAX_MESSAGE_BYTES}`);
    const written = (await floods())[1];
    expect(written).toBeGreaterThan(MAX_MESSAGE_BYTES);
    expect(written).toBeLessThan(WRITTEN_AT_MOST);
    expect(await pool.call({ tool: 'echo', arguments: { n: 2 } })).toMatchObject({ content: [{ type: 'text', text: 'echo {"n":2}' }] });
  });

  it('reads only the start of an error body that does not end: the call fails at once, not at its timeout', async () => {
    const failure = await failureOf(pool.call({ tool: 'flood-error', arguments: {} }));
    expect(failure.code).not.toBe('EXECUTION_TIMEOUT');
    expect(failure.message).toContain('500');
    const written = (await floods())[2];
    expect(written).toBeLessThan(WRITTEN_AT_MOST);
    expect(await pool.call({ tool: 'echo', arguments: { n: 3 } })).toMatchObject({ content: [{ type: 'text', text: 'echo {"n":3}' }] });
  });

  it('drops an oversized notification on the session stream and passes on the ones after it', async () => {
    const changed = new Promise<void>((resolve) => pool.once('toolsChanged', () => resolve()));
    expect(await pool.call({ tool: 'big-notice', arguments: {} })).toMatchObject({ content: [{ type: 'text', text: 'told 1' }] });
    await changed;
    expect(await pool.call({ tool: 'echo', arguments: { n: 4 } })).toMatchObject({ content: [{ type: 'text', text: 'echo {"n":4}' }] });
  });
});

describe("an HTTP upstream whose answer to one request breaks, or is no answer", () => {
  const KEY = 'K3yFromFile-qa16b-ABCDEFGHIJ';
  let keyed: McpServerPool;

  beforeAll(async () => {
    const address = (pool.status().instances[0]?.id ?? '').match(/http:\/\/[^/]+\/mcp/)?.[0];
    if (address === undefined) throw new Error('no session to read the upstream address from');
    const tools = findLaunchTools(probeIsolation(), process.env.PATH ?? '');
    keyed = new McpServerPool({ server: 'keyed', launch: { url: address, headers: { 'x-key': new SecretValue(KEY, 'file key') } }, instances: { min: 1, max: 1, callsPerInstance: 8 }, callTimeoutMs: 10_000 }, tools);
    await keyed.start();
  });

  afterAll(async () => {
    await keyed?.close();
  });

  it('fails only that call MCP_SERVER_LOST, saying its answer broke off, while a call beside it completes on the same session; never a crash loop', async () => {
    const session = keyed.status().instances[0]?.id;
    expect(session).toBeDefined();
    // More breaks than the crash loop allows (5 a minute): none of them is the session's failure.
    for (const tool of ['cut-json', 'cut-sse', 'huge-headers', 'cut-json', 'cut-sse', 'huge-headers']) {
      const bystander = keyed.call({ tool: 'slow', arguments: { ms: 300 } });
      const failure = await failureOf(keyed.call({ tool, arguments: {}, label: `keyed.${tool}` }));
      expect(failure, tool).toMatchObject({ code: 'MCP_SERVER_LOST', details: { answer: 'cut' } });
      expect(failure.message, tool).toContain(`the answer of MCP server 'keyed'`);
      expect(failure.message, tool).toMatch(tool === 'huge-headers' ? /headers were larger than the worker takes/ : /broke off/);
      expect(await bystander, tool).toMatchObject({ content: [{ type: 'text', text: 'slow done' }] });
    }
    expect(keyed.status()).toMatchObject({ state: 'running' });
    expect(keyed.status().instances.map((i) => i.id)).toEqual([session]);
  });

  it('fails at once, EXECUTION_FAILED, a request answered 202 with no body, and one whose body is not JSON without quoting it', async () => {
    const accepted = await failureOf(keyed.call({ tool: 'accepted', arguments: {} }));
    expect(accepted).toMatchObject({ code: 'EXECUTION_FAILED' });
    expect(accepted.message).toContain('HTTP 202 Accepted, which accepts only notifications, and sent no answer');
    const notJson = await failureOf(keyed.call({ tool: 'not-json', arguments: {} }));
    expect(notJson).toMatchObject({ code: 'EXECUTION_FAILED' });
    expect(notJson.message).toContain("MCP server 'keyed' answered the call with a body that is not JSON (not shown)");
    expect(JSON.stringify(notJson)).not.toContain(KEY.slice(0, 6));
  });

  it('says what to do about an HTTP 401 or a redirect at call time', async () => {
    const denied = await failureOf(keyed.call({ tool: 'denied', arguments: {} }));
    expect(denied.message).toContain("the upstream answered HTTP 401: it refused the worker's credentials; check the credentials in the server's headers");
    const moved = await failureOf(keyed.call({ tool: 'moved', arguments: {} }));
    expect(moved.message).toContain('the upstream answered HTTP 307, a redirect, which the worker does not follow');
  });

  it("tells a perCaller caller whose answer broke off that it did, not that its session ended: the session goes on", async () => {
    const address = (pool.status().instances[0]?.id ?? '').match(/http:\/\/[^/]+\/mcp/)?.[0];
    const tools = findLaunchTools(probeIsolation(), process.env.PATH ?? '');
    const own = new McpServerPool({ server: 'own', launch: { url: address! }, instances: { min: 0, max: 2 }, session: 'perCaller', callTimeoutMs: 10_000 }, tools);
    await own.start();
    try {
      const run = (tool: string) => {
        const executor = new McpToolExecutor(`own.${tool}`, { server: 'own', tool, timeoutMs: undefined }, own, pino({ level: 'silent' }), 'alice');
        const call = { id: `c-${tool}`, name: `own.${tool}`, arguments: {} };
        return executor.execute(call, { call, signal: new AbortController().signal, tier: 'host', attempt: 1, env: {}, trust: 'trusted', progress: () => undefined });
      };
      expect(await run('echo')).toMatchObject({ isError: false });
      const session = own.status().instances[0]?.id;
      const failure = await failureOf(run('cut-json'));
      expect(failure).toMatchObject({ code: 'MCP_SERVER_LOST', details: { answer: 'cut' } });
      expect(failure.details).not.toHaveProperty('session');
      expect(failure.message).not.toContain('your session');
      expect(await run('echo')).toMatchObject({ isError: false });
      expect(own.status().instances.map((i) => i.id)).toEqual([session]);
    } finally {
      await own.close();
    }
  });
});

