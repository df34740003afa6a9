import { spawnSync } from 'node:child_process';
import { accessSync, constants, existsSync, readFileSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import { ULIMITS } from './rlimits.js';

/** Flags that give a sandbox process its own user, network and PID namespaces. */
export const UNSHARE_FLAGS = ['--user', '--map-root-user', '--net', '--pid', '--fork', '--kill-child'] as const;

/**
 * bubblewrap's namespaces and process settings: every namespace it can make
 * (user, mount, PID, network, IPC, UTS, cgroup), none more for the process to
 * make (`--disable-userns`: a user namespace of its own would give it every
 * capability there, over files its root owns on the host), a session of its own (so
 * `kill(0)` and a terminal's signals stay inside), SIGKILL when the worker
 * dies, and no capabilities. Shared by the tool sandbox and sandboxed MCP
 * servers (mcp-servers/server-sandbox-command.ts), which add their own view.
 */
export const BWRAP_ISOLATION = ['--unshare-all', '--unshare-user', '--disable-userns', '--die-with-parent', '--new-session', '--cap-drop', 'ALL'] as const;

/**
 * A /proc of the sandbox's PID namespace, read-only. Why read-only: a worker
 * run by root makes the sandbox's root the host's root (its user namespace
 * maps 0 to 0), and the kernel lets the owner of a file write it with no
 * capability at all. The host's sysctls under /proc/sys (`kernel.core_pattern`
 * names a program the kernel runs as root), /proc/mtrr and the like are owned
 * by root. bubblewrap covers a few (/proc/irq, /proc/bus), not /proc/sys: it
 * judges by the directory's own mode. A read-only mount closes every such
 * file at once, whatever the kernel adds; a process writes little of its own
 * there (its `oom_score_adj`, its `comm`), which a sandbox does without.
 */
export const BWRAP_PROC = ['--proc', '/proc', '--remount-ro', '/proc'] as const;

/**
 * {@link BWRAP_ISOLATION} with a fresh, read-only /proc and a fresh /dev, starting in `/`. The
 * filesystem view is added per sandbox (see launch.ts).
 */
export const BWRAP_FLAGS = [...BWRAP_ISOLATION, ...BWRAP_PROC, '--dev', '/dev', '--chdir', '/'] as const;

/** Which isolation layers this machine offers, found by trying each one. */
export interface ProbeResult {
  /** `unshare` (util-linux) can create unprivileged user + network + PID namespaces. */
  readonly unshare: boolean;
  /**
   * `unshare` can also mount a `/proc` of the PID namespace (`--mount-proc`, a
   * mount namespace): without it the namespace's processes still read the
   * host's `/proc`. Absent: not probed, taken as no.
   */
  readonly unshareProc?: boolean;
  /**
   * `bwrap` (bubblewrap) can run Node in a filesystem view of its own that holds
   * only the Node binary and its libraries (and, per sandbox, the bundle).
   */
  readonly bubblewrap: boolean;
  /** `setpriv` (util-linux) can set a parent-death signal: without bubblewrap it kills a sandbox whose worker died. */
  readonly setpriv: boolean;
  /** `prlimit` (util-linux) is on the PATH; otherwise `sh -c ulimit` sets the rlimits. */
  readonly prlimit: boolean;
  /** `/bin/sh` exists for the `ulimit` fallback. */
  readonly shell: boolean;
  /** The process's own cgroup v2 directory, when it is writable. */
  readonly cgroupV2: string | undefined;
  /** The shared libraries the Node binary loads (with its ELF interpreter), as `ldd` names them: bound into the bubblewrap view. */
  readonly nodeLibraries: readonly string[];
}

function succeeds(file: string, args: readonly string[]): boolean {
  // Looked up on the worker's own PATH: an operator who hides a tool from the worker hides it from the probe too.
  const run = spawnSync(file, args, { stdio: 'ignore', timeout: 5_000, env: { PATH: process.env.PATH ?? '' } });
  return run.error === undefined && run.status === 0;
}

/** The writable cgroup v2 directory of this process, if any (cgroup v1 or a read-only mount gives none). */
export function probeCgroupV2(root = '/sys/fs/cgroup'): string | undefined {
  try {
    if (!existsSync(join(root, 'cgroup.controllers'))) return undefined;
    const line = readFileSync('/proc/self/cgroup', 'utf8')
      .split('\n')
      .find((l) => l.startsWith('0::'));
    if (line === undefined) return undefined;
    const dir = join(root, line.slice(3));
    accessSync(dir, constants.W_OK);
    return dir;
  } catch {
    return undefined;
  }
}

/** The absolute paths in `ldd` output: `libc.so.6 => /lib/…/libc.so.6 (0x…)` and `/lib64/ld-linux-x86-64.so.2 (0x…)`. */
export function librariesFromLdd(output: string): string[] {
  const found = new Set<string>();
  for (const line of output.split('\n')) {
    const path = (line.includes('=>') ? line.split('=>')[1] ?? '' : line).trim().split(/\s+/)[0] ?? '';
    if (isAbsolute(path)) found.add(path);
  }
  return [...found];
}

/** What `ldd` says `nodePath` loads; empty when there is no `ldd` (a static Node needs nothing). */
function nodeLibraries(nodePath: string): string[] {
  const run = spawnSync('ldd', [nodePath], { encoding: 'utf8', timeout: 5_000, env: { PATH: process.env.PATH ?? '' } });
  return run.error === undefined && run.status === 0 ? librariesFromLdd(run.stdout) : [];
}

/** bubblewrap's read-only view of `files` (each at its own path) on top of {@link BWRAP_FLAGS}. */
export function bwrapView(files: readonly string[]): string[] {
  return [...BWRAP_FLAGS, ...files.flatMap((file) => ['--ro-bind', file, file])];
}

/** Tries each layer once; takes a few tens of milliseconds. */
export function probeIsolation(nodePath = process.execPath): ProbeResult {
  const libraries = nodeLibraries(nodePath);
  return {
    unshare: succeeds('unshare', [...UNSHARE_FLAGS, '--', 'true']),
    unshareProc: succeeds('unshare', [...UNSHARE_FLAGS, '--mount-proc', '--', 'true']),
    // The view a sandbox gets, less its bundle: Node must start in it.
    bubblewrap: succeeds('bwrap', [...bwrapView([nodePath, ...libraries]), '--', nodePath, '-e', '0']),
    setpriv: succeeds('setpriv', ['--pdeathsig', 'KILL', '--', 'true']),
    prlimit: succeeds('prlimit', ['--version']),
    shell: succeeds('/bin/sh', ['-c', ULIMITS(1, 1_000_000, 64)]),
    cgroupV2: probeCgroupV2(),
    nodeLibraries: libraries,
  };
}
