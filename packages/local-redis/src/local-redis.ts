import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createConnection, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A running throw-away Redis. */
export interface LocalRedis {
  /** `redis://127.0.0.1:<port>` */
  readonly url: string;
  readonly port: number;
  /** The server's process id (benchmarks read its CPU time from /proc). */
  readonly pid: number;
  /** Stops the server and removes its directory. Safe to call twice. */
  stop(): Promise<void>;
}

export interface LocalRedisOptions {
  /** The server binary. @defaultValue `"redis-server"` from PATH */
  readonly binary?: string;
  /** @defaultValue a free port chosen by the OS */
  readonly port?: number;
  /** How long to wait for the server to answer PING. @defaultValue 10000 */
  readonly readyTimeoutMs?: number;
}

/** Raised when no redis-server can be started; the message says how to get one. */
export class LocalRedisUnavailableError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'LocalRedisUnavailableError';
  }
}

const INSTALL_HINT =
  'install one (Debian/Ubuntu: `apt-get update && apt-get install -y redis-server`; macOS: `brew install redis`) or point REDIS_URL at a running Redis';

/** True when `binary` can be run. */
export function hasRedisServer(binary = 'redis-server'): boolean {
  const probe = spawnSync(binary, ['--version'], { stdio: 'ignore' });
  return probe.error === undefined && probe.status === 0;
}

/** Asks the OS for a free loopback port. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/**
 * Sends one command over a raw socket and resolves with its reply's text (a
 * simple or bulk string; an error reply as `-ERR …`), or `undefined` when the
 * server does not answer: no client library needed to ask a fresh server.
 */
function ask(port: number, ...command: string[]): Promise<string | undefined> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port });
    let reply = Buffer.alloc(0);
    const done = (text: string | undefined): void => {
      socket.destroy();
      resolve(text);
    };
    socket.setTimeout(1000, () => done(undefined));
    socket.on('error', () => done(undefined));
    socket.on('connect', () => socket.write(`*${command.length}\r\n${command.map((c) => `$${Buffer.byteLength(c)}\r\n${c}\r\n`).join('')}`));
    socket.on('data', (data: Buffer) => {
      reply = Buffer.concat([reply, data]);
      const firstLine = reply.indexOf('\r\n');
      if (firstLine === -1) return;
      const head = reply.subarray(0, firstLine).toString();
      if (head[0] !== '$') return done(head);
      const length = Number(head.slice(1));
      if (length < 0) return done('');
      if (reply.length >= firstLine + 2 + length) done(reply.subarray(firstLine + 2, firstLine + 2 + length).toString());
    });
  });
}

function exited(child: ChildProcess): Promise<void> {
  return child.exitCode !== null || child.signalCode !== null ? Promise.resolve() : new Promise((resolve) => child.once('exit', () => resolve()));
}

/** A redis-server child process, stopped with {@link stopServer}. */
interface Server {
  readonly child: ChildProcess;
  readonly port: number;
  /** What it printed on stderr so far. */
  stderr(): string;
}

/** Starts `redis-server` on loopback with persistence off, its files in `dir`; `extra` adds options. */
function spawnServer(binary: string, port: number, dir: string, extra: readonly string[] = []): Server {
  const child = spawn(binary, ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, '--protected-mode', 'yes', ...extra], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  return { child, port, stderr: () => stderr };
}

async function stopServer(server: Server): Promise<void> {
  const { child } = server;
  if (child.exitCode === null && child.signalCode === null) {
    child.kill('SIGTERM');
    await exited(child);
  }
}

/** Resolves once the server answers PING; `false` when it exited or did not answer by `deadline`. */
async function answers(server: Server, deadline: number): Promise<boolean> {
  while ((await ask(server.port, 'PING')) !== '+PONG') {
    if (server.child.exitCode !== null || Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 25));
  }
  return true;
}

/**
 * Starts `redis-server` on loopback with persistence off and a private temp
 * directory, and resolves once it answers PING.
 *
 * @throws LocalRedisUnavailableError when the binary is missing or the server does not come up.
 */
export async function startLocalRedis(options: LocalRedisOptions = {}): Promise<LocalRedis> {
  const binary = options.binary ?? 'redis-server';
  if (!hasRedisServer(binary)) throw new LocalRedisUnavailableError(`no '${binary}' found on PATH; ${INSTALL_HINT}`);
  const port = options.port ?? (await freePort());
  const dir = mkdtempSync(join(tmpdir(), 'forge-redis-'));
  const server = spawnServer(binary, port, dir);
  const stop = async (): Promise<void> => {
    await stopServer(server);
    rmSync(dir, { recursive: true, force: true });
  };
  if (!(await answers(server, Date.now() + (options.readyTimeoutMs ?? 10_000)))) {
    await stop();
    throw new LocalRedisUnavailableError(`redis-server on port ${port} did not start: ${server.stderr().trim() || 'no answer to PING'}`);
  }
  return { url: `redis://127.0.0.1:${port}`, port, pid: server.child.pid ?? -1, stop };
}

/** A running throw-away Redis Cluster: masters only, every slot assigned. */
export interface LocalRedisCluster {
  /**
   * `redis+cluster://127.0.0.1:<port>,…`: the form the fleet's `REDIS_URL`
   * takes for a cluster (see docs/cluster.md).
   */
  readonly url: string;
  /** Each master's client port, in the order `redis-cli --cluster create` split the slots (the first holds slot 0). */
  readonly ports: readonly number[];
  /** Stops every node and removes their directory. Safe to call twice. */
  stop(): Promise<void>;
}

export interface LocalRedisClusterOptions {
  /** The server binary. @defaultValue `"redis-server"` from PATH */
  readonly binary?: string;
  /** The CLI that joins the nodes into a cluster. @defaultValue `"redis-cli"` from PATH */
  readonly cli?: string;
  /** How many masters share the 16384 slots (a cluster needs at least 3). @defaultValue 3 */
  readonly masters?: number;
  /** How long to wait for the nodes to answer and the cluster to report `cluster_state:ok`. @defaultValue 20000 */
  readonly readyTimeoutMs?: number;
}

/** `count` distinct free loopback ports. */
async function freePorts(count: number): Promise<number[]> {
  const ports = new Set<number>();
  while (ports.size < count) ports.add(await freePort());
  return [...ports];
}

function run(command: string, args: readonly string[], timeoutMs: number): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], timeout: timeoutMs });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.on('error', (error) => resolve({ code: null, output: `${output}${error.message}` }));
    child.on('close', (code) => resolve({ code, output }));
  });
}

/**
 * Starts a Redis Cluster of `masters` nodes on loopback (no replicas,
 * persistence off, one private temp directory), joins them with
 * `redis-cli --cluster create`, and resolves once every node reports
 * `cluster_state:ok`. Each node's cluster bus gets a free port of its own
 * (`--cluster-port`), so no port is assumed to be free but those the OS gave.
 *
 * @throws LocalRedisUnavailableError when a binary is missing or the cluster does not come up.
 */
export async function startLocalRedisCluster(options: LocalRedisClusterOptions = {}): Promise<LocalRedisCluster> {
  const binary = options.binary ?? 'redis-server';
  const cli = options.cli ?? 'redis-cli';
  const masters = options.masters ?? 3;
  if (masters < 3) throw new LocalRedisUnavailableError(`a Redis Cluster needs at least 3 masters, got ${masters}`);
  if (!hasRedisServer(binary)) throw new LocalRedisUnavailableError(`no '${binary}' found on PATH; ${INSTALL_HINT}`);
  const deadline = Date.now() + (options.readyTimeoutMs ?? 20_000);
  const ports = await freePorts(masters * 2);
  const dir = mkdtempSync(join(tmpdir(), 'forge-redis-cluster-'));
  const servers = ports.slice(0, masters).map((port, i) =>
    spawnServer(binary, port, dir, ['--cluster-enabled', 'yes', '--cluster-config-file', join(dir, `nodes-${port}.conf`), '--cluster-port', String(ports[masters + i])]),
  );
  const stop = async (): Promise<void> => {
    await Promise.all(servers.map(stopServer));
    rmSync(dir, { recursive: true, force: true });
  };
  const fail = async (why: string): Promise<never> => {
    const logs = servers.map((s) => s.stderr().trim()).filter((text) => text !== '');
    await stop();
    throw new LocalRedisUnavailableError(`the local Redis Cluster did not start: ${why}${logs.length > 0 ? `\n${logs.join('\n')}` : ''}`);
  };
  for (const server of servers) if (!(await answers(server, deadline))) await fail(`redis-server on port ${server.port} gave no answer to PING`);
  const nodes = servers.map((s) => `127.0.0.1:${s.port}`);
  const created = await run(cli, ['--cluster', 'create', ...nodes, '--cluster-replicas', '0', '--cluster-yes'], Math.max(1000, deadline - Date.now()));
  if (created.code !== 0) await fail(`\`${cli} --cluster create\` exited with ${created.code}: ${created.output.trim()}`);
  // redis-cli returns once the nodes agree on the configuration; each node reports ok once it sees every slot served.
  for (const server of servers) {
    while (!/^cluster_state:ok\r?$/m.test((await ask(server.port, 'CLUSTER', 'INFO')) ?? '')) {
      if (Date.now() > deadline) await fail(`node ${server.port} never reported cluster_state:ok`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  return { url: `redis+cluster://${nodes.join(',')}`, ports: servers.map((s) => s.port), stop };
}
