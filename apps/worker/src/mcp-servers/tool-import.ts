import { isFleetError, LoopSlice, measureSchema, parseToolDefinition, type Tier, type Tool } from '@forge-fleet/shared';
import type { Logger } from 'pino';
import { McpToolExecutor } from './mcp-tool-executor.js';
import { type McpServerConfig, placeOfTool, prefixedToolName } from './servers-file.js';
import type { McpServerPool } from './server-pool.js';
import { trustedSettings } from './trusted-settings.js';
import type { ServerListing, SkippedTool } from './upstream-instance.js';

export type { SkippedTool } from './upstream-instance.js';

/** What one server's `tools/list` gives a worker of one tier and pool. */
export interface ImportedTools {
  readonly tools: readonly Tool[];
  readonly skipped: readonly SkippedTool[];
}

/**
 * Most subschemas (see measureSchema) the tools of one server's list may hold
 * together. Each process that reads a definition compiles its schemas once, at
 * about a third of a millisecond per subschema: this keeps a list's compiling
 * to seconds, where 10,000 tools of 2,000 subschemas each would be hours.
 */
export const MAX_LISTING_SUBSCHEMAS = 50_000;

/**
 * The fleet tools of one server's `tools/list`, for a worker of `tier`/`pool`:
 * the tools the file places in that lane (a tool's own tier/pool, else its
 * server's), each named `prefix.tool`, with the server's input and output
 * schemas, title, description and annotations, and the settings the fleet
 * trusts (see trustedSettings: the file's, annotations only where they make a
 * tool more careful).
 *
 * The list is the server's and untrusted: a tool whose name or schemas the
 * fleet cannot serve (a name no MCP client could call, a schema that does not
 * compile or describes no object) is left out with the reason, and the rest
 * are served; a name listed twice is served once. Its schemas are compiled
 * with pauses that let the worker's calls run between tools (LoopSlice), and
 * the tools past {@link MAX_LISTING_SUBSCHEMAS}, in the list's order, are left out.
 */
export async function importTools(server: McpServerConfig, listing: ServerListing, lane: { readonly tier: Tier; readonly pool: string | undefined }, pool: McpServerPool, log: Pick<Logger, 'warn'>): Promise<ImportedTools> {
  const tools: Tool[] = [];
  const inLane = (own: string): boolean => {
    const place = placeOfTool(server, own);
    return place.tier === lane.tier && (lane.tier !== 'host' || place.pool === lane.pool);
  };
  // Entries that are no MCP tool at all (checkedTool): said by the worker whose lane their name falls in.
  const skipped: SkippedTool[] = listing.refused.filter((entry) => inLane(entry.tool));
  const listed = listing.tools;
  const seen = new Set<string>();
  const slice = new LoopSlice();
  let subschemas = 0;
  for (const mcp of listed) {
    await slice.pause();
    const own = mcp.name;
    if (!inLane(own)) continue;
    const place = placeOfTool(server, own);
    if (seen.has(own)) {
      skipped.push({ tool: own, reason: 'listed twice by the server; the first is served' });
      continue;
    }
    seen.add(own);
    const named = prefixedToolName(server.prefix, own);
    if (!named.ok) {
      skipped.push({ tool: own, reason: named.reason });
      continue;
    }
    // Counted before anything compiles. A schema past the bounds for one tool is refused below by the compiler itself,
    // naming where, and takes nothing from the list's share.
    const input = measureSchema(mcp.inputSchema);
    const output = measureSchema(mcp.outputSchema);
    const size = input.excess === undefined && output.excess === undefined ? input.subschemas + output.subschemas : 0;
    if (subschemas + size > MAX_LISTING_SUBSCHEMAS) {
      skipped.push({ tool: own, reason: `the server's tools before it hold ${subschemas} subschemas and this one ${size}: a server's list may hold at most ${MAX_LISTING_SUBSCHEMAS} in all, which the fleet compiles in bounded time; the tools past that are left out` });
      continue;
    }
    subschemas += size;
    const overrides = Object.hasOwn(server.tools, own) ? server.tools[own] : undefined;
    const settings = trustedSettings(mcp.annotations, overrides);
    const title = typeof mcp.title === 'string' ? mcp.title : typeof mcp.annotations?.title === 'string' ? mcp.annotations.title : undefined;
    let definition;
    try {
      definition = parseToolDefinition(
        {
          name: named.name,
          ...(title === undefined ? {} : { title: title.slice(0, 256) }),
          description: typeof mcp.description === 'string' ? mcp.description : '',
          parameters: mcp.inputSchema,
          ...(mcp.outputSchema === undefined ? {} : { outputSchema: mcp.outputSchema }),
          tier: place.tier,
          ...(place.pool === undefined ? {} : { pool: place.pool }),
          retryable: settings.retryable,
          speculatable: settings.speculatable,
          requiresConfirmation: settings.requiresConfirmation,
          ...(settings.timeoutMs === undefined ? {} : { timeoutMs: settings.timeoutMs }),
          ...(settings.approvalDeadlineMs === undefined ? {} : { approvalDeadlineMs: settings.approvalDeadlineMs }),
          // Always an object, `{}` when the server sent none: a server's tool is listed on the fleet's /mcp with MCP's
          // defaults for the hints it did not give, never with the fleet's own derivation alone, which vouches for tools it defines.
          annotations: { ...mcp.annotations },
        },
        { strict: false },
      );
    } catch (err) {
      skipped.push({ tool: own, reason: isFleetError(err) ? err.message : String(err) });
      continue;
    }
    // A tool the server runs only as a task (MCP 2025-11-25) is called as one; to the fleet's caller it is a call like any other.
    const asTask = mcp.execution?.taskSupport === 'required';
    tools.push({ definition, executor: new McpToolExecutor(named.name, { server: server.name, tool: own, timeoutMs: settings.timeoutMs, ...(asTask ? { asTask } : {}) }, pool, log) });
  }
  // A setting for a tool the server does not list (a name misspelt in the file) applies to nothing: said, not silent,
  // since a missed requiresConfirmation or timeoutMs is a protection the operator believes is there.
  const names = new Set([...listed.map((mcp) => mcp.name), ...listing.refused.map((entry) => entry.tool)]);
  for (const name of Object.keys(server.tools)) {
    if (!names.has(name)) log.warn({ server: server.name, tool: name }, `the servers file sets tools.${name} of server '${server.name}', which lists no tool of that name: the setting applies to nothing until it does (a misspelt name?)`);
  }
  return { tools, skipped };
}
