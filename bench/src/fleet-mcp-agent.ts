/**
 * The fleet-mcp arm's agent (issue #17): the official SDK `Client` over
 * Streamable HTTP to a dispatcher's `/mcp`, one `tools/call` of `noop` per
 * call, as an agent framework calls a fleet. One `Client` for the process
 * (frameworks hold one per server; the SDK multiplexes its requests over
 * fetch), its fetch undici's with a keep-alive pool of `inflight`
 * connections, so the connections match the http-per-call arm's — Node's
 * global fetch would pool by its own defaults and measure that instead.
 *
 * (Not bench/src/mcp/mcp-agent.ts: that one is issue #16's, an agent of
 * server-everything reached directly, through gateways or the fleet.)
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Agent, fetch as undiciFetch } from 'undici';
import { runAgent } from './agent-loop.js';
import { sdkFetch } from './sdk-fetch.js';

const [url = '', inflight = '1'] = process.argv.slice(2);
const n = Math.max(1, Number(inflight));
/** Long enough for a call behind 255 others on a slow stretch (the issue measured a 5.4 s p99), short enough to end a hung run. */
const CALL_TIMEOUT_MS = 120_000;
const dispatcher = new Agent({ connections: n, pipelining: 1, keepAliveTimeout: 60_000 });
// undici's own RequestInit and Response are the global ones in all but their declared types.
type UndiciInit = NonNullable<Parameters<typeof undiciFetch>[1]>;
const fetch = sdkFetch((input: string | URL, init?: RequestInit) => undiciFetch(input, { ...(init as UndiciInit | undefined), dispatcher }));
const transport = new StreamableHTTPClientTransport(new URL('/mcp', url), { fetch, requestInit: { headers: { authorization: `Bearer ${process.env.FORGE_TOKEN ?? ''}` } } });
const client = new Client({ name: 'forge-bench', version: '0.1.0' });
await client.connect(transport);

await runAgent(n, async () => {
  const result = await client.callTool({ name: 'noop', arguments: {} }, undefined, { timeout: CALL_TIMEOUT_MS });
  // A tool error comes back as a result, not a throw: it counts as a failed call all the same.
  if (result.isError === true) throw new Error(`noop failed: ${JSON.stringify(result).slice(0, 200)}`);
});
await client.close();
await dispatcher.close();
process.exit(0);
