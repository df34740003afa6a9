import { checkLivenessLimits } from './liveness.js';
import { bwrapView, type ProbeResult, UNSHARE_FLAGS } from './probe.js';
import { withRlimits } from './rlimits.js';

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
  /**
   * How often the worker checks that the event loop of a sandbox process
   * with calls in flight still answers, in milliseconds.
   * @defaultValue 500
   */
  readonly livenessIntervalMs: number;
  /**
   * How long a sandbox process's event loop may go without answering while
   * using next to no CPU (blocked in `Atomics.wait`, say) before the process
   * counts as frozen and is replaced, in milliseconds. A loop blocked by
   * computation is the CPU limit's business, not this one's.
   * @defaultValue 2000
   */
  readonly livenessTimeoutMs: number;
}

export const DEFAULT_LIMITS: SandboxLimits = Object.freeze({ cpuSeconds: 10, memoryMb: 256, outputBytes: 1 << 20, livenessIntervalMs: 500, livenessTimeoutMs: 2000 });

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
 * rlimits (prlimit, or `sh -c ulimit`), then bubblewrap (namespaces, a
 * filesystem view with Node, its libraries and the bundle only, a session of
 * its own, death with the worker) — or, without it, `setpriv --pdeathsig`
 * and `unshare` namespaces — then Node's permission model granting read
 * access to the bundle alone.
 *
 * @throws ConfigInvalidError when the liveness limits make no sense (see checkLivenessLimits).
 */
export function launchCommand(options: { probe: ProbeResult; nodePath: string; bundlePath: string; limits: SandboxLimits }): LaunchCommand {
  const { probe, limits } = options;
  // Checked here, where the limits are turned into a sandbox once, before any process starts.
  checkLivenessLimits(limits);
  const node = [
    options.nodePath,
    '--experimental-permission',
    `--allow-fs-read=${options.bundlePath}`,
    `--max-old-space-size=${Math.max(16, Math.floor(limits.memoryMb))}`,
    '--disable-warning=ExperimentalWarning',
    options.bundlePath,
    JSON.stringify({ outputBytes: limits.outputBytes }),
  ];
  const isolated = probe.bubblewrap ? ['bwrap', ...bwrapView([options.nodePath, ...probe.nodeLibraries, options.bundlePath]), '--', ...node] : withoutBubblewrap(probe, node);
  const dataBytes = (Math.floor(limits.memoryMb) + OFF_HEAP_HEADROOM_MB) * 1024 * 1024;
  const [file, ...args] = withRlimits(probe, { cpuSeconds: lifetimeCpuSeconds(limits), dataBytes, openFiles: MAX_OPEN_FILES }, isolated);
  return { file: file ?? options.nodePath, args };
}

/**
 * The fallback layers: namespaces from `unshare` where it works, and
 * `setpriv --pdeathsig` so that the sandbox (whose own session the worker
 * gives it at spawn) dies with its worker even when it is too busy or frozen
 * to notice its channel close.
 */
function withoutBubblewrap(probe: ProbeResult, node: readonly string[]): string[] {
  const namespaced = probe.unshare ? ['unshare', ...UNSHARE_FLAGS, '--', ...node] : [...node];
  return probe.setpriv ? ['setpriv', '--pdeathsig', 'KILL', '--', ...namespaced] : namespaced;
}
