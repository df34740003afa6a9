import { spawnSync } from 'node:child_process';
import { chmodSync, closeSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { McpInstance } from '../src/mcp-servers/instance.js';
import { findLaunchTools, type LaunchTools } from '../src/mcp-servers/launch-command.js';
import type { McpStdioLaunch } from '../src/mcp-servers/pool-options.js';
import { McpServerPool } from '../src/mcp-servers/server-pool.js';
import { assertServerSandbox, serverSandboxLayers } from '../src/mcp-servers/server-sandbox-layers.js';
import type { ServerSandbox } from '../src/mcp-servers/server-sandbox.js';
import { openSeccompFilter } from '../src/mcp-servers/seccomp-filter.js';
import { probeIsolation } from '../src/sandbox/probe.js';
import { startPoolChild } from './fixtures/pool-child.js';
import { type ProcessEntry, processTable } from './fixtures/proc-table.js';
import { failureOf } from './fixtures/fleet-failure.js';
import { closeTracked, track } from './fixtures/tracked.js';

const ROOT = fileURLToPath(new URL('../../..', import.meta.url));
const NODE_MODULES = join(ROOT, 'node_modules');
const FIXTURES = fileURLToPath(new URL('./fixtures', import.meta.url));
const FILESYSTEM_SERVER = join(NODE_MODULES, '@modelcontextprotocol/server-filesystem/dist/index.js');
const PROBE_SERVER = join(FIXTURES, 'sandbox-mcp-probe-server.mjs');
const ODD_SERVER = join(FIXTURES, 'odd-mcp-server.mjs');
const POOL_CHILD = join(FIXTURES, 'sandbox-mcp-pool-child.ts');
/** Bounded waits for what happens in the background. */
const WAIT = { timeout: 15_000, interval: 20 };
/** The environment the probe server is declared with; the test asserts it sees exactly this. */
const PROBE_ENV = { PATH: '/usr/bin:/bin', FORGE_PROBE: 'declared' };

let tools: LaunchTools;
let base: string;
/** A directory the server may read (declared `read`). */
let readable: string;
/** A directory the server may write (declared `write`). */
let writable: string;
/** A directory of the host that no server declares. */
let hidden: string;
let secret: string;

function textOf(result: CallToolResult): string {
  return result.content.map((block) => (block.type === 'text' ? block.text : '')).join('');
}

/** `root` and every process below it. */
function treeOf(root: number): ProcessEntry[] {
  const table = processTable();
  const tree = table.filter((p) => p.pid === root);
  for (let i = 0; i < tree.length; i += 1) tree.push(...table.filter((p) => p.ppid === tree[i]?.pid));
  return tree;
}

/** Those of `recorded` that still exist (the same pid with the same start time), zombies included. */
function survivors(recorded: readonly ProcessEntry[]): ProcessEntry[] {
  const now = processTable();
  return recorded.filter((r) => now.some((p) => p.pid === r.pid && p.start === r.start));
}

function probeLaunch(sandbox: ServerSandbox | undefined, env: Record<string, string> = PROBE_ENV): McpStdioLaunch {
  return { command: process.execPath, args: [PROBE_SERVER], env, startupTimeoutMs: 20_000, ...(sandbox === undefined ? {} : { sandbox }) };
}

/** The probe server's view: node_modules and the fixtures to run, plus the test's readable and writable directories. */
function probeSandbox(extra: Partial<ServerSandbox> = {}): ServerSandbox {
  return { read: [NODE_MODULES, FIXTURES, readable], write: [writable], ...extra };
}

async function startProbe(sandbox: ServerSandbox | undefined, env?: Record<string, string>): Promise<McpInstance> {
  return track(await McpInstance.start({ server: 'sandbox-probe', launch: probeLaunch(sandbox, env), tools }));
}

async function ask(instance: McpInstance, tool: string, args: Record<string, unknown> = {}): Promise<string> {
  return textOf(await instance.callTool(tool, args, { timeoutMs: 10_000 }));
}

beforeAll(() => {
  tools = findLaunchTools(probeIsolation(), process.env.PATH ?? '');
  base = mkdtempSync(join(tmpdir(), 'forge-mcp-sandbox-'));
  readable = join(base, 'readable');
  writable = join(base, 'writable');
  hidden = join(base, 'hidden');
  for (const dir of [readable, writable, hidden]) mkdirSync(dir);
  secret = join(hidden, 'secret.txt');
  writeFileSync(secret, 'the host secret');
  writeFileSync(join(readable, 'hello.txt'), 'hello from the root');
  // Symlinks that lead out of the declared paths, planted on the host.
  symlinkSync(secret, join(readable, 'link-to-secret'));
  symlinkSync(hidden, join(readable, 'link-to-hidden'));
});

afterEach(closeTracked);

afterAll(() => {
  rmSync(base, { recursive: true, force: true });
});

describe('the layers of sandboxed MCP servers on this machine', () => {
  it('are all enforced, so a strict worker starts', () => {
    const probe = probeIsolation();
    expect(serverSandboxLayers(probe)).toEqual({ network: 'namespace', filesystem: 'bubblewrap', processes: 'namespace', rlimits: 'prlimit', orphans: 'killed', syscalls: 'seccomp', environment: 'declared' });
    expect(assertServerSandbox(probe, true).filesystem).toBe('bubblewrap');
    expect(tools.bwrap).toMatch(/^\//);
  });
});

describe('the filesystem server in a sandboxed pool', () => {
  const filesystemPool = (): McpServerPool =>
    track(
      new McpServerPool(
        {
          server: 'filesystem',
          launch: { command: process.execPath, args: [FILESYSTEM_SERVER, readable, writable], sandbox: { read: [NODE_MODULES, readable], write: [writable] } },
          instances: { min: 1, max: 1 },
        },
        tools,
      ),
    );

  it('reads and lists inside its root, and writes only where a write path is declared', async () => {
    const pool = filesystemPool();
    await pool.start();
    const call = (tool: string, args: Record<string, unknown>): Promise<CallToolResult> => pool.call({ tool, arguments: args });
    expect(textOf(await call('read_text_file', { path: join(readable, 'hello.txt') }))).toBe('hello from the root');
    expect(textOf(await call('list_directory', { path: readable }))).toContain('[FILE] hello.txt');

    const written = await call('write_file', { path: join(writable, 'out.txt'), content: 'written in the sandbox' });
    expect(written.isError).not.toBe(true);
    expect(readFileSync(join(writable, 'out.txt'), 'utf8')).toBe('written in the sandbox');

    // Its own checks allow the path (it is inside an allowed directory); the read-only mount refuses it.
    const refused = await call('write_file', { path: join(readable, 'new.txt'), content: 'x' });
    expect(refused.isError).toBe(true);
    expect(textOf(refused)).toMatch(/EROFS|read-only/i);
    expect(existsSync(join(readable, 'new.txt'))).toBe(false);
  });

  it('fails paths outside its root, directly and through symlinks planted inside it', async () => {
    const pool = filesystemPool();
    await pool.start();
    for (const path of [secret, join(readable, 'link-to-secret'), join(readable, 'link-to-hidden', 'secret.txt'), '/etc/hostname']) {
      const result = await pool.call({ tool: 'read_text_file', arguments: { path } });
      expect(result.isError, path).toBe(true);
      expect(textOf(result)).not.toContain('the host secret');
    }
  });
});

describe('a sandboxed server process', () => {
  it('cannot read host files outside its view, even when its own checks would let it', async () => {
    const instance = await startProbe(probeSandbox());
    expect(await ask(instance, 'read', { path: join(readable, 'hello.txt') })).toBe('hello from the root');
    expect(await ask(instance, 'read', { path: secret })).toBe('ERR:ENOENT');
    expect(await ask(instance, 'read', { path: join(readable, 'link-to-secret') })).toBe('ERR:ENOENT');
    expect(await ask(instance, 'read', { path: join(readable, 'link-to-hidden', 'secret.txt') })).toBe('ERR:ENOENT');
    // The worker's process does not exist in its PID namespace, so neither does its environment.
    expect(await ask(instance, 'read', { path: `/proc/${process.pid}/environ` })).toBe('ERR:ENOENT');
    expect(await ask(instance, 'read', { path: '/etc/passwd' })).toBe('ERR:ENOENT');
    // The namespace's init (bubblewrap) holds nothing but the declared environment either.
    const init = await ask(instance, 'read', { path: '/proc/1/environ' });
    const initNames = init.startsWith('ERR:') ? [] : init.split('\0').filter((v) => v !== '').map((v) => v.slice(0, v.indexOf('=')));
    expect(initNames.every((name) => Object.hasOwn(PROBE_ENV, name))).toBe(true);

    // The control: the same server on the host reads what the sandbox hides.
    const host = await startProbe(undefined);
    expect(await ask(host, 'read', { path: secret })).toBe('the host secret');
  });

  it('writes only to write paths and its private /tmp', async () => {
    const instance = await startProbe(probeSandbox());
    expect(await ask(instance, 'write', { path: join(writable, 'w.txt'), text: 'ok' })).toBe('ok');
    expect(readFileSync(join(writable, 'w.txt'), 'utf8')).toBe('ok');
    expect(await ask(instance, 'write', { path: join(readable, 'w.txt'), text: 'no' })).toBe('ERR:EROFS');
    expect(await ask(instance, 'write', { path: '/w.txt', text: 'no' })).toBe('ERR:EROFS');
    expect(await ask(instance, 'write', { path: join(NODE_MODULES, 'w.txt'), text: 'no' })).toBe('ERR:EROFS');
    expect(await ask(instance, 'write', { path: '/tmp/scratch.txt', text: 'private' })).toBe('ok');
    expect(existsSync('/tmp/scratch.txt') && readFileSync('/tmp/scratch.txt', 'utf8') === 'private').toBe(false);
  });

  it('cannot reach the network: not the worker on 127.0.0.1, not a name, not an outside address', async () => {
    let accepted = 0;
    const listener: Server = createServer((socket) => {
      accepted += 1;
      socket.destroy();
    });
    await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
    const address = listener.address();
    const port = typeof address === 'object' && address !== null ? address.port : 0;
    try {
      const instance = await startProbe(probeSandbox());
      expect(await ask(instance, 'connect', { host: '127.0.0.1', port })).toBe('ERR:ECONNREFUSED');
      expect(await ask(instance, 'lookup', { host: 'example.com' })).toMatch(/^ERR:/);
      expect(await ask(instance, 'connect', { host: '1.1.1.1', port: 443 })).toMatch(/^ERR:(ENETUNREACH|EHOSTUNREACH|TIMEOUT)$/);
      expect(accepted).toBe(0);

      // The control: the same server on the host reaches the listener.
      const host = await startProbe(undefined);
      expect(await ask(host, 'connect', { host: '127.0.0.1', port })).toBe('connected');
      await vi.waitFor(() => expect(accepted).toBe(1), WAIT);
    } finally {
      await new Promise((resolve) => listener.close(resolve));
    }
  });

  it('sees exactly its declared environment, and runs under its declared rlimits', async () => {
    const instance = await startProbe(probeSandbox({ limits: { openFiles: 200, cpuSeconds: 900, memoryMb: 1500 } }));
    expect(JSON.parse(await ask(instance, 'env'))).toEqual(PROBE_ENV);
    const limits = await ask(instance, 'read', { path: '/proc/self/limits' });
    expect(limits).toMatch(/Max open files\s+200\s+200/);
    expect(limits).toMatch(/Max cpu time\s+900\s+900/);
    expect(limits).toMatch(new RegExp(`Max data size\\s+${1500 * 1024 * 1024}\\s+${1500 * 1024 * 1024}`));
    expect(limits).toMatch(/Max core file size\s+0\s+0/);
  });

  it('refuses to start a command or working directory outside its view, naming the path to declare', async () => {
    const script = join(hidden, 'server.sh');
    writeFileSync(script, '#!/bin/sh\nexit 0\n');
    chmodSync(script, 0o755);
    const outside = await failureOf(McpInstance.start({ server: 'outside', launch: { command: script, args: [], env: {}, startupTimeoutMs: 5_000, sandbox: { read: [], write: [] } }, tools }));
    expect(outside.code).toBe('CONFIG_INVALID');
    expect(outside.message).toContain(`declare ${script}`);
    const onPath = await failureOf(McpInstance.start({ server: 'outside', launch: { command: 'server.sh', args: [], env: { PATH: hidden }, startupTimeoutMs: 5_000, sandbox: { read: [], write: [] } }, tools }));
    expect(onPath.message).toContain(`declare ${script}`);
    const cwd = await failureOf(McpInstance.start({ server: 'cwd', launch: { ...probeLaunch(probeSandbox()), cwd: hidden }, tools }));
    expect(cwd.code).toBe('CONFIG_INVALID');
    expect(cwd.message).toContain(`working directory ${hidden} is not in the server's filesystem view`);
  });

  it('takes what it started with it when closed, even a process that left its process group', async () => {
    const instance = await startProbe(probeSandbox());
    expect(await ask(instance, 'spawn-sleep')).toMatch(/^\d+$/);
    const tree = await vi.waitFor(() => {
      const found = treeOf(instance.pid);
      expect(found.map((p) => p.comm)).toContain('sleep');
      return found;
    }, WAIT);
    // bubblewrap outside, its init inside, the server, the sleep.
    expect(tree.length).toBeGreaterThanOrEqual(4);
    expect(instance.reaperPid).toBeUndefined();
    await instance.close();
    await vi.waitFor(() => expect(survivors(tree)).toEqual([]), WAIT);
  });

  it('without bubblewrap, still takes what it started with it: the unshare PID namespace dies with the server', async () => {
    expect(tools.unshare).toMatch(/^\//);
    const instance = track(await McpInstance.start({ server: 'sandbox-probe-unshare', launch: probeLaunch(probeSandbox()), tools: { ...tools, bwrap: undefined } }));
    const tree = await vi.waitFor(() => {
      const found = treeOf(instance.pid);
      expect(found.map((p) => p.comm)).toContain('node');
      return found;
    }, WAIT);
    // No reaper beside the server: the namespace is what reaps.
    expect(tree.map((p) => p.comm)).not.toContain('sh');
    expect(instance.reaperPid).toBeUndefined();
    expect(await ask(instance, 'spawn-sleep')).toMatch(/^\d+$/);
    const withSleep = await vi.waitFor(() => {
      const found = treeOf(instance.pid);
      expect(found.map((p) => p.comm)).toContain('sleep');
      return found;
    }, WAIT);
    await instance.close();
    await vi.waitFor(() => expect(survivors(withSleep)).toEqual([]), WAIT);
  });

  it('is ended when it closes its stdout and runs on, with bubblewrap and with unshare, though its launchers hold the pipe too', async () => {
    for (const launchTools of [tools, { ...tools, bwrap: undefined }]) {
      // Its `mute` tool closes its stdout (where it answers) and runs on.
      const launch = { command: process.execPath, args: [ODD_SERVER], env: PROBE_ENV, startupTimeoutMs: 20_000, sandbox: probeSandbox() };
      // Its calls may take a minute: before, the call waited for that (EXECUTION_TIMEOUT) since no end of file came.
      const pool = track(new McpServerPool({ server: 'mute', launch, instances: { min: 1, max: 1 }, callTimeoutMs: 60_000 }, launchTools));
      await pool.start();
      const failure = await failureOf(pool.call({ tool: 'mute', arguments: {} }));
      expect(failure.code).toBe('MCP_SERVER_LOST');
      // A replacement serves.
      expect(textOf(await pool.call({ tool: 'pid', arguments: {} }))).toMatch(/^\d+$/);
      await pool.close();
    }
  }, 60_000);

  it('leaves no process behind when its worker is killed with SIGKILL', async () => {
    const { child, firstLine, exited } = await startPoolChild(POOL_CHILD, ROOT);
    try {
      const started = JSON.parse(firstLine) as { pids: number[]; sleep: string };
      expect(started.sleep).toMatch(/^\d+$/);
      expect(started.pids).toHaveLength(1);
      const tree = await vi.waitFor(() => {
        const found = treeOf(child.pid ?? 0).filter((p) => p.pid !== child.pid);
        expect(found.map((p) => p.comm)).toContain('sleep');
        return found;
      }, WAIT);
      expect(tree.map((p) => p.pid)).toContain(started.pids[0]);
      child.kill('SIGKILL');
      await exited;
      await vi.waitFor(() => expect(survivors(tree)).toEqual([]), WAIT);
    } finally {
      child.kill('SIGKILL');
      await exited;
    }
  });
});

/**
 * Runs `tries` (name, Python statement) and `more` (Python lines) under bubblewrap with the filter a server's launch
 * loads (seccomp-filter.ts); each try prints `name ok` or `name refused <errno>`. Returns what Python printed.
 */
function underFilter(tries: readonly (readonly [string, string])[], more: readonly string[] = []): string[] {
  const fd = openSeccompFilter();
  expect(fd).toBeDefined();
  const probes = tries.map(([name, code]) => `try:\n    ${code}; print(${JSON.stringify(name)}, 'ok')\nexcept OSError as e:\n    print(${JSON.stringify(name)}, 'refused', e.errno)`);
  const script = ['import ctypes, os, socket', ...probes, ...more].join('\n');
  const view = ['--ro-bind', '/usr', '/usr', '--symlink', 'usr/lib', '/lib', '--symlink', 'usr/lib64', '/lib64', '--symlink', 'usr/bin', '/bin', '--proc', '/proc', '--dev', '/dev'];
  const run = spawnSync('bwrap', ['--unshare-all', '--die-with-parent', '--seccomp', '3', ...view, '--', '/usr/bin/python3', '-c', script], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe', fd!] });
  closeSync(fd!);
  expect(run.stderr).toBe('');
  return run.stdout.trim().split('\n');
}

describe('the seccomp filter of sandboxed servers', () => {
  it("refuses every Unix socket a sandboxed process could aim at a path — socket(), and socketpair()'s datagram sockets — and keeps stream pairs, pipes and IP sockets", () => {
    const printed = underFilter([
      ['unix stream', 'socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)'],
      ['unix dgram', 'socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)'],
      ['pair dgram', 'socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)'],
      ['pair stream', 'socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)'],
      ['pair seqpacket', 'socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)'],
      ['inet', 'socket.socket(socket.AF_INET, socket.SOCK_DGRAM)'],
      ['pipe', 'os.pipe()'],
    ]);
    expect(printed).toEqual(['unix stream refused 13', 'unix dgram refused 13', 'pair dgram refused 13', 'pair stream ok', 'pair seqpacket ok', 'inet ok', 'pipe ok']);
  });

  it('refuses every socket family the network namespace does not cover (vsock reaches a VM\'s host), and tracing its own sandbox', () => {
    // Families by number (the constants are not in every Python): vsock 40, packet 17, bluetooth 31, the kernel's crypto 38.
    // Then PTRACE_ATTACH to bubblewrap's init (pid 1 of the namespace), which would stop it.
    const printed = underFilter(
      [
        ['vsock', 'socket.socket(40, socket.SOCK_STREAM)'],
        ['packet', 'socket.socket(17, socket.SOCK_RAW)'],
        ['bluetooth', 'socket.socket(31, socket.SOCK_STREAM)'],
        ['alg', 'socket.socket(38, socket.SOCK_SEQPACKET)'],
        ['inet6', 'socket.socket(socket.AF_INET6, socket.SOCK_STREAM)'],
        ['netlink', 'socket.socket(16, socket.SOCK_RAW, 0)'],
      ],
      ["libc = ctypes.CDLL(None, use_errno=True)\nprint('ptrace', libc.ptrace(16, 1, 0, 0), ctypes.get_errno())"],
    );
    expect(printed).toEqual(['vsock refused 97', 'packet refused 97', 'bluetooth refused 97', 'alg refused 97', 'inet6 ok', 'netlink ok', 'ptrace -1 1']);
  });
});
