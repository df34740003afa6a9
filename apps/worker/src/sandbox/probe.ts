import { spawnSync } from 'node:child_process';
import { accessSync, constants, existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/** Flags that give a sandbox process its own user, network and PID namespaces. */
export const UNSHARE_FLAGS = ['--user', '--map-root-user', '--net', '--pid', '--fork', '--kill-child'] as const;

/** Which isolation layers this machine offers, found by trying each one. */
export interface ProbeResult {
  /** `unshare` (util-linux) can create unprivileged user + network + PID namespaces. */
  readonly unshare: boolean;
  /** `prlimit` (util-linux) is on the PATH; otherwise `sh -c ulimit` sets the rlimits. */
  readonly prlimit: boolean;
  /** `/bin/sh` exists for the `ulimit` fallback. */
  readonly shell: boolean;
  /** The process's own cgroup v2 directory, when it is writable. */
  readonly cgroupV2: string | undefined;
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

/** Tries each layer once; takes a few milliseconds. */
export function probeIsolation(): ProbeResult {
  return {
    unshare: succeeds('unshare', [...UNSHARE_FLAGS, '--', 'true']),
    prlimit: succeeds('prlimit', ['--version']),
    shell: succeeds('/bin/sh', ['-c', 'ulimit -t 1 -d 1000000 -n 64 -c 0']),
    cgroupV2: probeCgroupV2(),
  };
}
