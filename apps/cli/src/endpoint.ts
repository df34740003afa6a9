import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { FleetClient } from '@forge-fleet/client';
import { ConfigInvalidError, isFleetError } from '@forge-fleet/shared';
import { z } from 'zod';
import { UsageError } from './args.js';
import type { CliEnv } from './env.js';

/** Where `npm start` serves its dispatcher unless told otherwise (scripts/start.mjs, README). */
export const DEFAULT_URL = 'http://127.0.0.1:8080';

/** The dispatcher a fleet command talks to, and the token it sends. */
export interface Endpoint {
  readonly url: string;
  readonly token?: string | undefined;
}

/** What `npm start` writes to `<FORGE_STATE_DIR>/dev.json` (extra fields are ignored). */
const DevFile = z.object({ url: z.string().optional(), token: z.string().optional(), adminToken: z.string().optional() });

/** Operator commands: against an `npm start` fleet they use its admin token (an agent token may not list or decide approvals, nor read queues). */
const OPERATOR_COMMANDS = new Set(['forge approvals', 'forge approvals approve', 'forge approvals deny', 'forge approvals modify', 'forge queues']);

function readDevFile(stateDir: string): z.infer<typeof DevFile> {
  const file = join(stateDir, 'dev.json');
  if (!existsSync(file)) return {};
  try {
    return DevFile.parse(JSON.parse(readFileSync(file, 'utf8')));
  } catch (error) {
    throw new ConfigInvalidError(file, ['not the dev.json `npm start` writes; delete it, or pass --url and --token'], { cause: error });
  }
}

/**
 * Picks the dispatcher and token: `--url`, else `FORGE_URL`, else the URL in
 * `dev.json` (a running `npm start`), else {@link DEFAULT_URL}; `--token`,
 * else `FORGE_TOKEN`, else the development token in `dev.json` (its admin
 * token for `approvals` and `queues`) — but only when talking to that file's
 * own fleet, so a dev token never goes to another server.
 * @throws UsageError for a URL that is not http(s).
 */
export function resolveEndpoint(flags: { url?: string | undefined; token?: string | undefined }, env: Readonly<CliEnv>, command: string, usage: string): Endpoint {
  const dev = readDevFile(env.FORGE_STATE_DIR);
  const url = flags.url ?? env.FORGE_URL ?? dev.url ?? DEFAULT_URL;
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch (error) {
    throw new UsageError(command, `--url '${url}' is not a URL; e.g. ${DEFAULT_URL}`, usage, { cause: error });
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw new UsageError(command, `--url '${url}' must be an http:// or https:// URL`, usage);
  const devToken = OPERATOR_COMMANDS.has(command) ? (dev.adminToken ?? dev.token) : dev.token;
  const token = flags.token ?? env.FORGE_TOKEN ?? (dev.url !== undefined && dev.url === url ? devToken : undefined);
  return { url, ...(token === undefined || token === '' ? {} : { token }) };
}

/** What the fleet commands use of {@link FleetClient} (tests give a fake). */
export type FleetApi = Pick<FleetClient, 'tools' | 'submit' | 'get' | 'approvals' | 'decide' | 'queues' | 'close'>;

/** A fleet command's client: one request at a time, so no batching and two connections at most. */
export function openFleetClient(endpoint: Endpoint): FleetApi {
  return new FleetClient({ url: endpoint.url, ...(endpoint.token === undefined ? {} : { token: endpoint.token }), batch: false, connections: 2 });
}

/**
 * The dispatcher could not be reached at all (refused, unknown host, reset).
 * Not a fleet error: no dispatcher answered to give it a code.
 */
export class UnreachableError extends Error {
  constructor(
    readonly url: string,
    cause: Error & { code: string },
  ) {
    super(`cannot reach the dispatcher at ${url} (${cause.message || cause.code}); start a fleet with \`npm start\`, or pass --url / set FORGE_URL`, { cause });
    this.name = 'UnreachableError';
  }
}

/** Network failures carry a system (`ECONNREFUSED`) or undici (`UND_ERR_SOCKET`) code; answers from the fleet are FleetErrors. */
function isTransportError(error: unknown): error is Error & { code: string } {
  return error instanceof Error && !isFleetError(error) && typeof (error as { code?: unknown }).code === 'string';
}

/** Runs `work` with a client of `endpoint`, closing it after; a network failure becomes an {@link UnreachableError}. */
export async function withFleet<T>(endpoint: Endpoint, open: (endpoint: Endpoint) => FleetApi, work: (api: FleetApi) => Promise<T>): Promise<T> {
  const api = open(endpoint);
  try {
    return await work(api);
  } catch (error) {
    throw isTransportError(error) ? new UnreachableError(endpoint.url, error) : error;
  } finally {
    await api.close();
  }
}
