// The worker's view of processes, from /proc: what a host-tier server started outside its process group is
// found here before the server ends, and killed with it (instance.ts); the tests count processes the same way.
import { readdirSync, readFileSync } from 'node:fs';

/** One process as /proc shows it. */
export interface ProcessEntry {
  readonly pid: number;
  readonly ppid: number;
  /** Its process group. */
  readonly pgrp: number;
  /** `R`, `S`, `Z` (a zombie)… */
  readonly state: string;
  /** Start time in clock ticks since boot: with the pid, names one process even after its pid is reused. */
  readonly start: string;
  readonly comm: string;
}

/** Every process now, zombies too; one that ends while it is read is left out. */
export function processTable(): ProcessEntry[] {
  const found: ProcessEntry[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${name}/stat`, 'utf8');
    } catch {
      continue;
    }
    // "pid (comm) state ppid pgrp … starttime …": comm may hold spaces and parentheses, so fields are counted after the last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    found.push({ pid: Number(name), state: fields[0] ?? '', ppid: Number(fields[1]), pgrp: Number(fields[2]), start: fields[19] ?? '', comm: stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')) });
  }
  return found;
}

/**
 * Every process descended from `pid` now, whatever session or group it put
 * itself in (children, their children…), read from /proc; empty where there
 * is no /proc. Taken while the server still lives: once it has exited, what it
 * started belongs to PID 1 and cannot be told from anyone else's.
 */
export function descendantsOf(pid: number, table: readonly ProcessEntry[] = readTable()): ProcessEntry[] {
  const children = new Map<number, ProcessEntry[]>();
  for (const entry of table) {
    const siblings = children.get(entry.ppid);
    if (siblings === undefined) children.set(entry.ppid, [entry]);
    else siblings.push(entry);
  }
  const found: ProcessEntry[] = [];
  const seen = new Set<number>([pid]);
  const queue = [pid];
  for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
    for (const child of children.get(next) ?? []) {
      if (seen.has(child.pid)) continue;
      seen.add(child.pid);
      found.push(child);
      queue.push(child.pid);
    }
  }
  return found;
}

/**
 * SIGKILLs each of `entries` that is still the process it was: a pid whose
 * start time changed now belongs to another process and is left alone.
 */
export function killEach(entries: readonly ProcessEntry[]): void {
  for (const entry of entries) {
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry.pid}/stat`, 'utf8');
    } catch {
      continue;
    }
    if (stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] !== entry.start) continue;
    try {
      process.kill(entry.pid, 'SIGKILL');
    } catch {
      // Gone meanwhile.
    }
  }
}

function readTable(): ProcessEntry[] {
  try {
    return processTable();
  } catch {
    return [];
  }
}
