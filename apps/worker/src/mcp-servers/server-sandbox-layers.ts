import { ConfigInvalidError } from '@forge-fleet/shared';
import type { ProbeResult } from '../sandbox/probe.js';
import { seccompFilter } from './seccomp-filter.js';

/** The probe's findings a sandboxed MCP server depends on. */
export type ServerSandboxProbe = Pick<ProbeResult, 'bubblewrap' | 'unshare' | 'unshareProc' | 'setpriv' | 'prlimit' | 'shell'>;

/** What confines a Platform- or Embedded-tier MCP server on this machine, layer by layer. */
export interface ServerSandboxLayers {
  /**
   * `namespace`: a network namespace of its own, with nothing in it but its own loopback (bubblewrap, else
   * `unshare`): neither the host's interfaces nor the worker's localhost are reachable. `none`: the host's network.
   */
  readonly network: 'namespace' | 'none';
  /**
   * `bubblewrap`: a private mount namespace holding only the system's programs and libraries (read-only), the
   * declared `read` (read-only) and `write` paths, an empty /tmp, its own /proc and a minimal /dev.
   * `none`: everything the worker's user can reach.
   */
  readonly filesystem: 'bubblewrap' | 'none';
  /**
   * `namespace`: a PID namespace of its own with its own /proc: it cannot see or signal the worker, and whatever
   * it starts dies with it, even what left its process group. `namespace-host-proc`: the same, but `/proc` is the
   * host's (unshare without a mount of its own): it sees every process and its command line, though it can
   * signal none. `process-group`: only a process group of its own.
   */
  readonly processes: 'namespace' | 'namespace-host-proc' | 'process-group';
  /** How CPU time, memory, open files, processes and core dumps are capped (see server-sandbox.ts). */
  readonly rlimits: 'prlimit' | 'ulimit' | 'none';
  /** `killed`: the kernel kills the server when its worker dies, even by SIGKILL (`setpriv --pdeathsig`, bubblewrap's `--die-with-parent`). */
  readonly orphans: 'killed' | 'none';
  /**
   * `seccomp`: the filter of seccomp-filter.ts (bubblewrap loads it, on x86-64 and arm64): no Unix socket it could
   * aim at a path, no socket family beyond IPv4, IPv6 and netlink (vsock), no tracing of its own sandbox, no io_uring.
   * `none`: every system call its user may make.
   */
  readonly syscalls: 'seccomp' | 'none';
  /** The server starts with exactly its declared environment. */
  readonly environment: 'declared';
}

/** The layers `probe` found, as sandboxed MCP servers get them (launch-command.ts decides from the same probe). */
export function serverSandboxLayers(probe: ServerSandboxProbe): ServerSandboxLayers {
  const namespaces = probe.bubblewrap || probe.unshare;
  return Object.freeze({
    network: namespaces ? 'namespace' : 'none',
    filesystem: probe.bubblewrap ? 'bubblewrap' : 'none',
    processes: probe.bubblewrap || (probe.unshare && probe.unshareProc === true) ? 'namespace' : probe.unshare ? 'namespace-host-proc' : 'process-group',
    rlimits: probe.prlimit ? 'prlimit' : probe.shell ? 'ulimit' : 'none',
    orphans: probe.setpriv || probe.bubblewrap ? 'killed' : 'none',
    syscalls: probe.bubblewrap && seccompFilter() !== undefined ? 'seccomp' : 'none',
    environment: 'declared',
  });
}

/**
 * The layers missing from `layers`, each in words saying what it leaves open,
 * for a warning or a refusal. Empty when every layer holds. Unlike the tool
 * sandbox (which has Node's permission model under it), an MCP server has no
 * other filesystem guard, so the view is required too.
 */
export function missingServerSandboxLayers(layers: ServerSandboxLayers): string[] {
  const missing: string[] = [];
  if (layers.network === 'none') missing.push('network namespace (bubblewrap or unshare): sandboxed MCP servers can reach the network');
  if (layers.filesystem === 'none') missing.push('filesystem view (bubblewrap): sandboxed MCP servers see every file the worker\'s user can, not only their declared paths (under a worker run by root, they may write every file root owns); install bubblewrap');
  if (layers.processes === 'process-group') missing.push('PID namespace (bubblewrap or unshare): a process a server starts outside its process group can outlive it');
  if (layers.processes === 'namespace-host-proc') missing.push("/proc of its own (bubblewrap, or unshare --mount-proc): sandboxed MCP servers see the host's processes and their command lines in /proc");
  if (layers.rlimits === 'none') missing.push('rlimits (prlimit or /bin/sh ulimit): sandboxed MCP servers run without CPU-time, memory, open-file and process caps');
  if (layers.syscalls === 'none') missing.push("system-call filter (bubblewrap's seccomp, on x86-64 and arm64): sandboxed MCP servers can open Unix sockets to host services by their path, vsock sockets to a virtual machine's host, and trace their own sandbox");
  if (layers.orphans === 'none') missing.push('death with the worker (setpriv --pdeathsig or bubblewrap): a server outlives a worker killed with SIGKILL');
  return missing;
}

/**
 * The layers sandboxed MCP servers get here; under `--strict-sandbox`, a
 * refusal when any is missing. The worker calls it at start when it serves
 * Platform- or Embedded-tier MCP servers, and logs the layers it returns
 * (and, when not strict, each missing one as a warning).
 *
 * @throws ConfigInvalidError when `strict` and a layer is missing, naming each one.
 */
export function assertServerSandbox(probe: ServerSandboxProbe, strict: boolean): ServerSandboxLayers {
  const layers = serverSandboxLayers(probe);
  const missing = missingServerSandboxLayers(layers);
  if (strict && missing.length > 0) {
    throw new ConfigInvalidError('MCP server sandbox', [
      ...missing.map((layer) => `this machine cannot enforce the ${layer}`),
      'run where bubblewrap (apt-get install bubblewrap), unprivileged user namespaces and prlimit work, or drop the strict sandbox (development only)',
    ]);
  }
  return layers;
}
