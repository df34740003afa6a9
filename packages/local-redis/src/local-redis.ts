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

/** One PING over a raw socket: no client library needed to know the server is up. */
function ping(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port });
    const done = (ok: boolean): void => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(500, () => done(false));
    socket.on('error', () => done(false));
    socket.on('connect', () => socket.write('PING\r\n'));
    socket.on('data', (data) => done(data.toString().startsWith('+PONG')));
  });
}

function exited(child: ChildProcess): Promise<void> {
  return child.exitCode !== null || child.signalCode !== null ? Promise.resolve() : new Promise((resolve) => child.once('exit', () => resolve()));
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
  const child = spawn(binary, ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, '--protected-mode', 'yes'], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));

  const stop = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      await exited(child);
    }
    rmSync(dir, { recursive: true, force: true });
  };

  const deadline = Date.now() + (options.readyTimeoutMs ?? 10_000);
  while (!(await ping(port))) {
    if (child.exitCode !== null || Date.now() > deadline) {
      await stop();
      throw new LocalRedisUnavailableError(`redis-server on port ${port} did not start: ${stderr.trim() || 'no answer to PING'}`);
    }
    await new Promise((r) => setTimeout(r, 25));
  }
  return { url: `redis://127.0.0.1:${port}`, port, pid: child.pid ?? -1, stop };
}
