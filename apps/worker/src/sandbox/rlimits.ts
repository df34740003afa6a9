import type { ProbeResult } from './probe.js';

/** The rlimits one sandboxed process tree starts under (each process of it gets its own CPU-time and data budget). */
export interface Rlimits {
  /** RLIMIT_CPU, in whole seconds: the kernel sends SIGXCPU, then SIGKILL, to a process that has used this much CPU time. */
  readonly cpuSeconds: number;
  /**
   * RLIMIT_DATA, in bytes: private writable memory (heap, Buffers, WebAssembly memories). Not RLIMIT_AS: V8
   * reserves far more address space than it uses (WebAssembly guard regions alone take gigabytes), so an
   * address-space cap that is low enough to matter stops Node from starting.
   */
  readonly dataBytes: number;
  /** RLIMIT_NOFILE: open descriptors. */
  readonly openFiles: number;
  /**
   * RLIMIT_NPROC: processes of the (real) user, counted by the kernel per user and user namespace; the kernel
   * does not apply it to root. Left as it is when absent.
   */
  readonly processes?: number;
}

/** The `ulimit` commands of the shell fallback, one limit each (see {@link withRlimits}); also what the probe tries. */
export const ULIMITS = (cpuSeconds: number, dataKb: number, openFiles: number): string => `ulimit -t ${cpuSeconds} && ulimit -d ${dataKb} && ulimit -n ${openFiles} && ulimit -c 0`;

/**
 * `command` under `limits`, with core dumps off: `prlimit … -- command` where
 * prlimit works, else `/bin/sh -c 'ulimit … && exec "$@"'`, else `command`
 * as it is (the caller reports the missing layer).
 *
 * @param programs where prlimit is, when the command is run from an environment without the worker's PATH.
 */
export function withRlimits(probe: Pick<ProbeResult, 'prlimit' | 'shell'>, limits: Rlimits, command: readonly string[], programs: { readonly prlimit?: string } = {}): string[] {
  const { cpuSeconds, dataBytes, openFiles, processes } = limits;
  if (probe.prlimit) {
    return [programs.prlimit ?? 'prlimit', `--cpu=${cpuSeconds}`, `--data=${dataBytes}`, `--nofile=${openFiles}`, ...(processes === undefined ? [] : [`--nproc=${processes}`]), '--core=0', '--', ...command];
  }
  if (probe.shell) {
    // One limit per `ulimit`: dash, Debian's /bin/sh, refuses several in one ("too many arguments"). Its process
    // cap is -p where bash's is -u (bash's -p is the pipe size, which cannot be set): -u first, then -p.
    const nproc = processes === undefined ? '' : `{ ulimit -u ${processes} 2>/dev/null || ulimit -p ${processes}; } && `;
    return ['/bin/sh', '-c', `${ULIMITS(cpuSeconds, dataBytes / 1024, openFiles)} && ${nproc}exec "$@"`, 'forge-sandbox', ...command];
  }
  return [...command];
}
