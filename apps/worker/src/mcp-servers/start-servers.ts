/**
 * A worker's `--mcp` start: the servers file read, the server sandbox's
 * layers checked and said, the servers of this worker's lane started.
 * main.ts loads this module only when `--mcp` is given, so a worker without
 * servers never loads the MCP SDK (about 4 MB of heap).
 */
import { ConfigInvalidError, type PoolName, type Tier } from '@forge-fleet/shared';
import type { Logger } from 'pino';
import { probeIsolation } from '../sandbox/probe.js';
import { messageBoundFor } from './answer-lines.js';
import { findLaunchTools } from './launch-command.js';
import { assertServerSandbox, missingServerSandboxLayers } from './server-sandbox-layers.js';
import { loadServersFile } from './servers-file.js';
import { WorkerServers } from './worker-servers.js';

export interface StartServersOptions {
  /** The servers file (`--mcp`). */
  readonly file: string;
  readonly tier: Tier;
  readonly pool: PoolName | undefined;
  /** Platform/Embedded servers run in the server sandbox (FORGE_SANDBOX=on); host servers never do. */
  readonly sandbox: boolean;
  /** Refuse to start when a sandbox layer is missing (`--strict-sandbox`). */
  readonly strict: boolean;
  /** FORGE_MAX_RESULT_BYTES: a server's messages may be as large as a result the worker keeps (see messageBoundFor). */
  readonly maxResultBytes: number;
  /** FORGE_MCP_RETRY_AFTER_MS (see WorkerServers). */
  readonly reviveAfterMs: number | undefined;
  /** A stop asked for while the servers start: the start waits no more (see WorkerServers.start). */
  readonly stopRequested?: AbortSignal;
  /** Handed the servers as soon as they are made, before they start: the worker's probes show them while they do. */
  readonly onServers?: (servers: WorkerServers) => void;
  readonly log: Logger;
}

/**
 * Starts the servers the file places in this worker's lane.
 * @throws ConfigInvalidError when the file is invalid, places nothing here, or (strict) a sandbox layer is missing.
 */
export async function startWorkerServers(o: StartServersOptions): Promise<WorkerServers> {
  const file = loadServersFile(o.file, process.env, { tier: o.tier, pool: o.pool });
  const sandboxServers = o.tier !== 'host' && o.sandbox;
  if (o.tier !== 'host' && !sandboxServers) o.log.warn('FORGE_SANDBOX=off: platform/embedded MCP servers run unconfined (development only)');
  const probe = probeIsolation();
  if (sandboxServers) {
    // Refused under the strict sandbox when a layer is missing; otherwise each missing one is said once, here.
    const layers = assertServerSandbox(probe, o.strict);
    o.log.info({ layers }, 'MCP server sandbox layers');
    for (const layer of missingServerSandboxLayers(layers)) o.log.warn({ layer }, 'MCP server sandbox layer not enforced on this machine');
  }
  const servers = new WorkerServers({ servers: file.servers, tier: o.tier, pool: o.pool, launchTools: findLaunchTools(probe, process.env.PATH ?? ''), sandbox: sandboxServers, reviveAfterMs: o.reviveAfterMs, maxMessageBytes: messageBoundFor(o.maxResultBytes), log: o.log });
  if (servers.names.length === 0) {
    throw new ConfigInvalidError('MCP servers file', [`${file.source} places no server (and no tool) in tier ${o.tier}${o.pool === undefined ? '' : `, pool ${o.pool}`}: give this worker the --tier/--pool of a server, or set tier/pool in the file`]);
  }
  o.onServers?.(servers);
  o.log.info({ servers: servers.names }, 'MCP servers starting');
  await servers.start(o.stopRequested);
  for (const s of servers.status()) o.log.info({ server: s.name, state: s.state, tools: s.tools, ...(s.error === undefined ? {} : { err: s.error }) }, 'MCP server');
  return servers;
}
