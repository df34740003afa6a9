/**
 * An MCP arm's agent process: the official SDK `Client`, reaching
 * server-everything one of three ways, with `inflight` calls at a time in
 * the shared measuring loop (agent-loop.ts).
 *
 * `mcp-agent.ts stdio <inflight> <call>`: spawns the server itself over stdio
 * (one server process inside the agent's reach, as agents use stdio servers).
 * `mcp-agent.ts http <url> <inflight> <call>`: a gateway's Streamable HTTP endpoint.
 * `mcp-agent.ts fleet <url> <inflight> <call>`: `FleetClient` to a dispatcher,
 * calling `everything.<tool>` (FORGE_TOKEN grants it).
 * `<call>` is `echo` or `gzip:<blob url>` (see everything.ts).
 */
import { FleetClient } from '@forge-fleet/client';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { sdkFetch } from '../sdk-fetch.js';
import { runAgent } from '../agent-loop.js';
import { ECHO, EVERYTHING_COMMAND, gzipCall, type ToolCall } from './everything.js';

/** The fleet's name for the server's tools: the servers file names the server `everything`. */
export const FLEET_SERVER_NAME = 'everything';

/** Long enough for a call queued behind 255 others at a slow gateway (its p99 is seconds), short enough to end a hung run. */
const CALL_TIMEOUT_MS = 120_000;

const argv = process.argv.slice(2);
const mode = argv[0];
const [target, inflightText, callText] = mode === 'stdio' ? [undefined, argv[1], argv[2]] : [argv[1], argv[2], argv[3]];
const inflight = Math.max(1, Number(inflightText ?? '1'));
const call: ToolCall = callText?.startsWith('gzip:') === true ? gzipCall(callText.slice('gzip:'.length)) : ECHO;
let n = 0;

/** A tool result that reports an error counts as a failed call, as a thrown one does. */
function failed(result: object): boolean {
  return 'isError' in result && result.isError === true;
}

if (mode === 'fleet') {
  const client = new FleetClient({ url: target ?? '', connections: inflight, token: process.env.FORGE_TOKEN ?? '', timeoutMs: CALL_TIMEOUT_MS });
  await runAgent(inflight, async () => {
    const result = await client.call(`${FLEET_SERVER_NAME}.${call.tool}`, call.args(n++));
    if (failed(result)) throw new Error(`${call.tool} failed: ${result.error?.code ?? ''} ${result.content.slice(0, 200)}`);
  });
} else if (mode === 'stdio' || mode === 'http') {
  const client = new Client({ name: 'forge-bench', version: '0.1.0' });
  const transport =
    mode === 'stdio'
      ? new StdioClientTransport({ command: EVERYTHING_COMMAND.command, args: [...EVERYTHING_COMMAND.args], stderr: 'ignore' })
      : new StreamableHTTPClientTransport(new URL(target ?? ''), { fetch: sdkFetch() });
  await client.connect(transport);
  await runAgent(inflight, async () => {
    const result = await client.callTool({ name: call.tool, arguments: call.args(n++) }, undefined, { timeout: CALL_TIMEOUT_MS });
    if (failed(result)) throw new Error(`${call.tool} failed: ${JSON.stringify(result).slice(0, 200)}`);
  });
  // Closing the stdio transport ends the server it spawned: no process outlives the point.
  await client.close();
} else {
  throw new Error(`mcp-agent: unknown mode ${String(mode)}; use stdio, http or fleet`);
}
process.exit(0);
