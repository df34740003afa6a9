import type { SandboxIsolation } from './sandbox.js';

/**
 * The isolation layers a sandbox could not put in place on this machine, in
 * words for a log line or a start-up refusal. Empty when everything holds.
 */
export function unenforced(isolation: SandboxIsolation): string[] {
  const missing: string[] = [];
  if (isolation.network === 'none') missing.push('network namespace (handlers can reach the network)');
  if (isolation.processes === 'none') missing.push('PID namespace (handlers can see and signal processes of the worker\'s user)');
  if (isolation.rlimits === 'none') missing.push('rlimits (no CPU-time, data-size or open-file caps; only the V8 heap cap and the watchdog remain)');
  return missing;
}
