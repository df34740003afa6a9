/**
 * CPU time and memory of an MCP point's processes, by kind, from /proc.
 * A server-everything process is a `server` wherever it sits — the agent's
 * child (direct), the gateway's, the worker's — so each kind's column shows
 * only its own work, and every process of a started tree is counted once.
 */
import { readFileSync } from 'node:fs';
import { cpuMs, descendants, peakRssMb } from '../proc.js';
import { EVERYTHING_ENTRY } from './everything.js';

/** What a process of an MCP point is. */
export type McpKind = 'agent' | 'gateway' | 'dispatcher' | 'worker' | 'server' | 'redis';
export const MCP_KINDS: readonly McpKind[] = Object.freeze(['agent', 'gateway', 'dispatcher', 'worker', 'server', 'redis']);

/** A process the point started itself, and what it is. */
export interface Root {
  readonly pid: number;
  readonly kind: McpKind;
}

/** The command line of a process, its arguments joined by spaces; empty once it is gone. */
export function cmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ');
  } catch {
    return '';
  }
}

/** Whether a process is one of server-everything's (a shell a gateway runs it under counts too: its command line names the entry). */
export function isServerProcess(pid: number): boolean {
  return cmdline(pid).includes(EVERYTHING_ENTRY);
}

/** Every live process under the roots, with its kind: its root's, or `server`. */
export function classify(roots: readonly Root[]): Map<number, McpKind> {
  const kinds = new Map<number, McpKind>();
  for (const root of roots) {
    kinds.set(root.pid, root.kind);
    for (const pid of descendants(root.pid)) kinds.set(pid, isServerProcess(pid) ? 'server' : root.kind);
  }
  return kinds;
}

/** CPU ms of each process (its own time: reaped children are counted as themselves while they live). */
export function cpuSnapshot(kinds: ReadonlyMap<number, McpKind>): Map<number, number> {
  const out = new Map<number, number>();
  for (const pid of kinds.keys()) {
    const ms = cpuMs(pid);
    if (!Number.isNaN(ms)) out.set(pid, ms);
  }
  return out;
}

/**
 * CPU ms each kind used between two snapshots. A process born in between
 * (a restarted instance) counts from zero; one that ended counts up to its
 * last snapshot (short of its last moments, which a window of seconds can bear).
 */
export function cpuByKind(kinds: ReadonlyMap<number, McpKind>, before: ReadonlyMap<number, number>, after: ReadonlyMap<number, number>): Record<McpKind, number> {
  const out = Object.fromEntries(MCP_KINDS.map((k) => [k, 0])) as Record<McpKind, number>;
  for (const [pid, ms] of after) {
    const kind = kinds.get(pid);
    if (kind !== undefined) out[kind] += ms - (before.get(pid) ?? 0);
  }
  return out;
}

/** The largest peak RSS (VmHWM) among each kind's processes, in MB: one process's footprint, not the kind's sum. */
export function peakRssByKind(kinds: ReadonlyMap<number, McpKind>): Record<McpKind, number> {
  const out = Object.fromEntries(MCP_KINDS.map((k) => [k, 0])) as Record<McpKind, number>;
  for (const [pid, kind] of kinds) {
    const mb = peakRssMb(pid);
    if (!Number.isNaN(mb)) out[kind] = Math.max(out[kind], mb);
  }
  return out;
}
