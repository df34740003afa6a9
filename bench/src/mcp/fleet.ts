/**
 * The fleet arm of the MCP points: a dispatcher and host-tier workers given
 * server-everything in a servers file (`--mcp`), on the production path —
 * tokens verified, calls signed per lane and verified by the worker, audit on.
 * Its tools are `everything.<tool>` in the catalog.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '@forge-fleet/local-redis';
import { deriveQueueKey, generateTokenKeys, mintToken, queueName } from '@forge-fleet/shared';
import { descendants, nodeArgsFor, type Spawned, spawnNode, until } from '../proc.js';
import { EVERYTHING_COMMAND } from './everything.js';
import { isServerProcess } from './process-kinds.js';

/** The server's name in the servers file, and so its tools' prefix. */
export const SERVER_NAME = 'everything';

/** Keys of one benchmark fleet: the dispatcher's, the host worker's lane key, and an agent token granted the server's tools. */
export interface McpFleetSecrets {
  readonly prefix: string;
  readonly dispatcher: Record<string, string>;
  readonly hostWorker: Record<string, string>;
  readonly agentToken: string;
  /** Mints more tokens of this fleet (the soak's agents each get a subject of their own). */
  readonly mint: (subject: string) => Promise<string>;
}

/** Fresh keys, as `npm start` makes them; host-tier tools need a grant, so the token carries `everything.*`. */
export async function mcpFleetSecrets(prefix: string): Promise<McpFleetSecrets> {
  const secret = randomBytes(32);
  const tokenKeys = generateTokenKeys();
  const mint = (subject: string): Promise<string> => mintToken(tokenKeys.privateKeyPem, { subject, grants: [`${SERVER_NAME}.*`], expiresInSeconds: 6 * 3600 });
  return {
    prefix,
    dispatcher: { FORGE_SIGNING_SECRET: secret.toString('base64url'), FORGE_TOKEN_PUBLIC_KEY: tokenKeys.publicKeyPem },
    hostWorker: { FORGE_CALL_KEY: deriveQueueKey(secret, queueName(prefix, 'host')).toString('base64url') },
    agentToken: await mint('bench-mcp-agent'),
    mint,
  };
}

/** How server-everything is served by each worker. */
export interface McpServing {
  /** Instances per worker (`min` = `max`: all warm before the window opens). */
  readonly instances: number;
  readonly callsPerInstance: number;
}

/**
 * Writes the servers file into a fresh temporary directory and returns its
 * path. Tools are marked retryable: echo and gzip have no side effects, and
 * the soak needs calls of a killed instance or worker to run again.
 * `marker`: an argument added to the server's command line (see mcp-soak.ts).
 */
export function writeServersFile(serving: McpServing, options: { marker?: string } = {}): string {
  const file = join(mkdtempSync(join(tmpdir(), 'forge-bench-mcp-')), 'servers.json');
  const servers = {
    version: 1,
    servers: {
      [SERVER_NAME]: {
        command: EVERYTHING_COMMAND.command,
        // A marker argument (the server ignores arguments after its transport) tells this run's processes from others' in /proc.
        args: [...EVERYTHING_COMMAND.args, ...(options.marker === undefined ? [] : [options.marker])],
        // Nothing is inherited; the server reads no other variable it needs.
        env: { PATH: { fromEnv: 'PATH' } },
        tier: 'host',
        instances: { min: serving.instances, max: serving.instances },
        callsPerInstance: serving.callsPerInstance,
        // Quick restarts: the soak kills instances, and a point's numbers must not wait on a long backoff.
        restartBackoff: { initialMs: 50, maxMs: 1000 },
        tools: { echo: { retryable: true }, 'get-sum': { retryable: true }, 'gzip-file-as-resource': { retryable: true } },
      },
    },
  };
  // JSON is YAML: the file's loader reads both.
  writeFileSync(file, `${JSON.stringify(servers, null, 2)}\n`);
  return file;
}

/** How to start an app: its built bin (as shipped, `npm run bench` builds first), or with `fromSource` its TypeScript through tsx. */
export function appArgs(app: 'dispatcher' | 'worker', fromSource: boolean): string[] {
  return fromSource ? ['--conditions=forge-source', '--import', 'tsx', `apps/${app}/src/main.ts`] : nodeArgsFor(`apps/${app}/bin/forge-${app}.js`);
}

/** The environment every process of a benchmark fleet shares. */
export function fleetEnv(redisUrl: string, secrets: McpFleetSecrets, extra: Record<string, string> = {}): Record<string, string> {
  return { REDIS_URL: redisUrl, FORGE_PREFIX: secrets.prefix, LOG_LEVEL: 'warn', ...extra };
}

/** Starts a dispatcher on a free port. */
export async function startDispatcher(redisUrl: string, secrets: McpFleetSecrets, options: { fromSource: boolean; env?: Record<string, string> }): Promise<{ proc: Spawned; url: string }> {
  const port = await freePort();
  const proc = spawnNode(appArgs('dispatcher', options.fromSource), { ...fleetEnv(redisUrl, secrets, options.env), ...secrets.dispatcher, PORT: String(port) });
  return { proc, url: `http://127.0.0.1:${port}` };
}

/** Starts a host-tier worker serving the servers file only (no tools module). */
export function startWorker(redisUrl: string, secrets: McpFleetSecrets, options: { serversFile: string; concurrency: number; fromSource: boolean; env?: Record<string, string> }): Spawned {
  return spawnNode([...appArgs('worker', options.fromSource), '--tier', 'host', '--mcp', options.serversFile, '--concurrency', String(options.concurrency)], {
    ...fleetEnv(redisUrl, secrets, options.env),
    ...secrets.hostWorker,
  });
}

/**
 * The server-everything instances a worker has started, from /proc: `node`
 * processes only (comm, not cmdline), since a wrapper a launcher runs it
 * under (a shell, a sandbox) names the entry in its arguments too.
 */
export function serverProcessesOf(workerPid: number): number[] {
  return descendants(workerPid).filter((pid) => isServerProcess(pid) && commOf(pid).startsWith('node'));
}

function commOf(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
  } catch {
    return '';
  }
}

/** Waits until the dispatcher lists `tool` for the token and every worker has its instances up. */
export async function waitServing(url: string, token: string, tool: string, workers: readonly Spawned[], instances: number, timeoutMs = 60_000): Promise<void> {
  await until(
    `${url} listing ${tool}`,
    async () => {
      for (const w of workers) if (w.child.exitCode !== null) throw new Error(`worker exited: ${w.out.slice(-800)}`);
      const body = (await (await fetch(`${url}/v1/tools`, { headers: { authorization: `Bearer ${token}` } })).json()) as { tools?: { name: string }[] };
      return body.tools?.some((t) => t.name === tool) === true;
    },
    timeoutMs,
  );
  await until(`${instances} server instances per worker`, () => workers.every((w) => serverProcessesOf(w.child.pid!).length >= instances), timeoutMs);
}
