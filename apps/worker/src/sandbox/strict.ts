import type { SandboxIsolation } from './sandbox.js';

/**
 * The isolation layers a sandbox could not put in place on this machine that
 * `--strict-sandbox` requires, in words for a log line or a start-up refusal.
 * Empty when everything required holds.
 */
export function unenforced(isolation: SandboxIsolation): string[] {
  const missing: string[] = [];
  if (isolation.network === 'none') missing.push('network namespace (handlers can reach the network)');
  if (isolation.processes === 'none') missing.push('PID namespace (only a JavaScript guard keeps handlers from signalling processes of the worker\'s user)');
  if (isolation.rlimits === 'none') missing.push('rlimits (no CPU-time, data-size or open-file caps; only the V8 heap cap and the watchdog remain)');
  return missing;
}

/**
 * Layers missing here that `--strict-sandbox` does not require (yet), in
 * words for a warning. bubblewrap is not required because the container
 * images and seccomp profile in infra/ allow `unshare` but not the mounts
 * bubblewrap makes: requiring it would stop those workers from starting.
 */
export function weakened(isolation: SandboxIsolation): string[] {
  const missing: string[] = [];
  if (isolation.filesystem !== 'bubblewrap+permission-model') {
    missing.push('filesystem view (bubblewrap): a host Unix socket such as docker.sock exists in the sandbox by its path, refused only by the JavaScript socket guard; install bubblewrap');
  }
  if (isolation.orphans !== 'killed') missing.push('death with the worker (bubblewrap or setpriv): a sandbox busy or frozen in a call outlives a worker killed with SIGKILL');
  return missing;
}
