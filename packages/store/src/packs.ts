import { hash } from 'node:crypto';
import { stableStringify, type ToolDefinition } from '@forge-fleet/shared';

/**
 * A tool pack: the exact set of tools (each with the definition it is served
 * under) that one kind of worker serves in a lane. Workers announcing the same
 * pack share one BullMQ queue; workers of different packs share a lane (its
 * Redis user, key space, reply lists and signing key) but never a queue, so a
 * job only ever reaches a worker that serves every call in it.
 *
 * Why a queue per pack rather than per tool: a worker blocks on one queue per
 * pack it serves (one), not one per tool, so its connections do not grow with
 * its tools; and calls of several tools admitted together still leave as one
 * job when one pack serves them all.
 */
export interface ToolPack {
  /** Short, stable id: a hash of the tool names and their definitions' hashes. */
  readonly id: string;
  /** Tool name → hash of the definition (stable JSON) it is served under. */
  readonly tools: ReadonlyMap<string, string>;
}

/** Characters of a hashed pack id (hex): 60 bits, far from any collision among a lane's packs. */
const PACK_ID_LENGTH = 15;

/** Hash of a definition as the catalog stores it (stable JSON). */
export function definitionHash(json: string): string {
  return hash('sha256', json, 'base64url').slice(0, 22);
}

/** What a pack may be named by its operator (`forge-worker --pack`): the rules of pool names. */
export const PACK_NAME_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * A worker's own pack (see {@link directPackOf}): its pack's id, `.w` and a hash of the worker's id. The `.` is in no
 * operator's name, so a direct pack is never taken for a pack of workers.
 */
const DIRECT_PACK_PATTERN = /^[A-Za-z0-9_-]{1,64}\.w[0-9a-f]{16}$/;

/**
 * The pack only one worker takes calls from: the same tools as `pack`, under an id of that worker's. A worker that
 * keeps sessions per caller (an MCP server with `session: perCaller`) has one beside its pack, so that a caller's
 * call taken by another worker of the pack can be sent on to the worker holding the caller's session. Dispatchers
 * never route a new call there; they re-home what it holds when its worker is gone, as for any pack.
 */
export function directPackOf(pack: ToolPack, workerId: string): ToolPack {
  return { id: `${pack.id}.w${hash('sha256', workerId, 'hex').slice(0, 16)}`, tools: pack.tools };
}

/** Whether a pack id names a worker's own pack (see {@link directPackOf}). */
export function isDirectPack(id: string): boolean {
  return DIRECT_PACK_PATTERN.test(id);
}

/**
 * The pack a worker serving these definitions belongs to: named by `name`
 * (an operator who wants a queue name known before the worker starts, e.g.
 * for an autoscaler), else by a hash of its tools.
 */
export function packOf(definitions: readonly ToolDefinition[], name?: string): ToolPack {
  const tools = new Map<string, string>();
  for (const d of [...definitions].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) tools.set(d.name, definitionHash(stableStringify(d)));
  if (name !== undefined && !PACK_NAME_PATTERN.test(name)) throw new RangeError(`pack name '${name}' must match ${PACK_NAME_PATTERN}`);
  return { id: name ?? hash('sha256', packJson(tools), 'hex').slice(0, PACK_ID_LENGTH), tools };
}

/** The pack as the catalog keeps it: `[[name, definition hash], …]` sorted by name. */
export function packJson(tools: ReadonlyMap<string, string>): string {
  return JSON.stringify([...tools].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

/** Reads a pack back from the catalog; `undefined` for anything malformed (workers write it, so it is not trusted). */
export function parsePack(id: string, json: string): ToolPack | undefined {
  if (!PACK_NAME_PATTERN.test(id) && !isDirectPack(id)) return undefined;
  try {
    const pairs: unknown = JSON.parse(json);
    if (!Array.isArray(pairs)) return undefined;
    const tools = new Map<string, string>();
    for (const pair of pairs) {
      if (!Array.isArray(pair) || pair.length !== 2 || typeof pair[0] !== 'string' || typeof pair[1] !== 'string') return undefined;
      tools.set(pair[0], pair[1]);
    }
    return { id, tools };
  } catch {
    return undefined;
  }
}
