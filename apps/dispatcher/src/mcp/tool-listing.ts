import type { ToolDefinition } from '@forge-fleet/shared';
import { ErrorCode, type Tool, type ToolAnnotations } from '@modelcontextprotocol/sdk/types.js';
import { McpProtocolError } from './protocol-error.js';

/** How many tools one `tools/list` page holds. @defaultValue 50 */
export const DEFAULT_PAGE_SIZE = 50;

/** `_meta` keys the fleet adds to MCP messages (MCP asks for a prefix; ours is `forge-fleet/`). */
export const META = {
  /** On a tool: its tier (and `pool`, for host pools). On a result: the fleet call id and status. */
  tier: 'forge-fleet/tier',
  pool: 'forge-fleet/pool',
  callId: 'forge-fleet/callId',
  status: 'forge-fleet/status',
  /** On an `isError` result: the typed error `{ code, message, retryable, details }`. */
  error: 'forge-fleet/error',
} as const;

/**
 * MCP's defaults for hints a tool's annotations leave out: a tool that says
 * nothing may write, destroy, repeat its effects and reach the outside world.
 */
const MCP_DEFAULT_HINTS = { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true } as const;

/**
 * MCP tool annotations, derived from the definition. They are hints *to* the
 * client, made from what the fleet already enforces; the fleet never reads
 * annotations back (a client could send anything), so they cannot widen policy.
 *
 * - `readOnlyHint`: `speculatable` — a tool may be flagged speculatable only if
 *   running it has no side effects (it may run before the model decided to).
 * - `destructiveHint`: not read-only, and either a person must confirm each call
 *   (`requiresConfirmation`) or it runs on the host tier (real machine, real effects).
 *   Platform and embedded tools run isolated from the outside world.
 * - `idempotentHint`: `retryable` — the author declared a second run harmless.
 * - `openWorldHint`: host tier only; platform and embedded tools reach nothing outside.
 *
 * A definition that carries `annotations` — an MCP server's own (every tool
 * the worker imports carries them, `{}` when the server sent none) or its
 * author's — is listed, hint by hint, with the more careful of that derivation
 * and the annotations, where a hint they leave out takes MCP's default
 * ({@link MCP_DEFAULT_HINTS}): read-only and idempotent only if both say so,
 * destructive and open-world if either does. A tool they call destructive is
 * never read-only, whatever `speculatable` says; a read-only listing is never
 * destructive (MCP gives `destructiveHint` meaning only when not read-only).
 * Their other fields (`title`) are passed on.
 */
export function annotationsOf(definition: ToolDefinition): ToolAnnotations {
  const readOnly = definition.speculatable;
  const fleet = {
    readOnlyHint: readOnly,
    destructiveHint: !readOnly && (definition.requiresConfirmation || definition.tier === 'host'),
    idempotentHint: definition.retryable,
    openWorldHint: definition.tier === 'host',
  };
  const claims = definition.annotations;
  if (claims === undefined) return fleet;
  const hint = (name: keyof typeof MCP_DEFAULT_HINTS): boolean => {
    const value = claims[name];
    return typeof value === 'boolean' ? value : MCP_DEFAULT_HINTS[name];
  };
  // An explicit destructive claim beats a read-only one from the same source.
  const claimsReadOnly = hint('readOnlyHint') && claims.destructiveHint !== true;
  const listedReadOnly = fleet.readOnlyHint && claimsReadOnly;
  return {
    ...(typeof claims.title === 'string' ? { title: claims.title } : {}),
    readOnlyHint: listedReadOnly,
    destructiveHint: !listedReadOnly && (fleet.destructiveHint || hint('destructiveHint')),
    idempotentHint: fleet.idempotentHint && hint('idempotentHint'),
    openWorldHint: fleet.openWorldHint || hint('openWorldHint'),
  };
}

/** A fleet tool as MCP lists it. */
export function toMcpTool(definition: ToolDefinition): Tool {
  const { outputSchema } = definition;
  return {
    name: definition.name,
    ...(definition.title === undefined ? {} : { title: definition.title }),
    description: definition.description,
    // parseToolDefinition guarantees `type: "object"` for parameters.
    inputSchema: { ...definition.parameters, type: 'object' },
    // MCP output schemas describe objects only; a tool whose structured output is not an object is listed without one.
    ...(outputSchema?.type === 'object' ? { outputSchema: { ...outputSchema, type: 'object' as const } } : {}),
    annotations: annotationsOf(definition),
    _meta: { [META.tier]: definition.tier, ...(definition.pool === undefined ? {} : { [META.pool]: definition.pool }) },
  };
}

/**
 * The cursor is the name of the last tool of the previous page (base64url, so
 * clients treat it as opaque). Pages continue after that name: the order is
 * stable, and a tool joining or leaving between pages does not shift the others.
 */
const encodeCursor = (lastName: string): string => Buffer.from(lastName, 'utf8').toString('base64url');

function decodeCursor(cursor: string): string {
  const name = Buffer.from(cursor, 'base64url').toString('utf8');
  if (name === '' || Buffer.from(name, 'utf8').toString('base64url') !== cursor) {
    throw new McpProtocolError(ErrorCode.InvalidParams, 'invalid cursor: pass the nextCursor of the previous tools/list answer, or none for the first page');
  }
  return name;
}

/** One page of `tools` (sorted by name) after `cursor`. */
export function listPage(tools: readonly ToolDefinition[], cursor: string | undefined, pageSize: number): { tools: Tool[]; nextCursor?: string } {
  const after = cursor === undefined ? undefined : decodeCursor(cursor);
  const sorted = [...tools].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const rest = after === undefined ? sorted : sorted.filter((t) => t.name > after);
  const page = rest.slice(0, pageSize);
  const last = page.at(-1);
  return { tools: page.map(toMcpTool), ...(rest.length > pageSize && last !== undefined ? { nextCursor: encodeCursor(last.name) } : {}) };
}
