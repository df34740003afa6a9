import type { ProbeResult } from './probe.js';
import { UNSHARE_FLAGS } from './probe.js';

/** Resource limits of one sandbox process. */
export interface SandboxLimits {
  /**
   * CPU time one call may use, in seconds.
   * @defaultValue 10
   */
  readonly cpuSeconds: number;
  /**
   * JavaScript heap of a sandbox process, in MiB; off-heap memory (Buffers,
   * WebAssembly memories) is capped at this plus {@link OFF_HEAP_HEADROOM_MB}.
   * @defaultValue 256
   */
  readonly memoryMb: number;
  /**
   * Largest reply (the JSON of a result) a call may send back, in bytes.
   * @defaultValue 1 MiB
   */
  readonly outputBytes: number;
}

export const DEFAULT_LIMITS: SandboxLimits = Object.freeze({ cpuSeconds: 10, memoryMb: 256, outputBytes: 1 << 20 });

/** Room above the heap limit for Node's own data mappings, Buffers and WebAssembly memories. */
export const OFF_HEAP_HEADROOM_MB = 256;
/** Enough descriptors for Node's own pipes and event loop; a handler cannot open files anyway. */
const MAX_OPEN_FILES = 64;

/** The RLIMIT_CPU of a whole sandbox process: it serves many calls, each watched on its own (see SandboxProcess). */
export function lifetimeCpuSeconds(limits: SandboxLimits): number {
  return Math.ceil(limits.cpuSeconds) * 2 + 1;
}

export interface LaunchCommand {
  readonly file: string;
  readonly args: readonly string[];
}

/**
 * The command line of one sandbox process, outermost layer first:
 * rlimits (prlimit, or `sh -c ulimit`), namespaces (unshare), then Node's
 * permission model granting read access to the bundle alone.
 */
export function launchCommand(options: { probe: ProbeResult; nodePath: string; bundlePath: string; limits: SandboxLimits }): LaunchCommand {
  const { probe, limits } = options;
  const node = [
    options.nodePath,
    '--experimental-permission',
    `--allow-fs-read=${options.bundlePath}`,
    `--max-old-space-size=${Math.max(16, Math.floor(limits.memoryMb))}`,
    '--disable-warning=ExperimentalWarning',
    options.bundlePath,
    JSON.stringify({ outputBytes: limits.outputBytes }),
  ];
  const isolated = probe.unshare ? ['unshare', ...UNSHARE_FLAGS, '--', ...node] : node;
  const cpu = lifetimeCpuSeconds(limits);
  const dataBytes = (Math.floor(limits.memoryMb) + OFF_HEAP_HEADROOM_MB) * 1024 * 1024;
  if (probe.prlimit) {
    const [file, ...rest] = ['prlimit', `--cpu=${cpu}`, `--data=${dataBytes}`, `--nofile=${MAX_OPEN_FILES}`, '--core=0', '--', ...isolated];
    return { file: file ?? 'prlimit', args: rest };
  }
  if (probe.shell) {
    return { file: '/bin/sh', args: ['-c', `ulimit -t ${cpu} -d ${dataBytes / 1024} -n ${MAX_OPEN_FILES} -c 0 && exec "$@"`, 'forge-sandbox', ...isolated] };
  }
  const [file, ...args] = isolated;
  return { file: file ?? options.nodePath, args };
}
