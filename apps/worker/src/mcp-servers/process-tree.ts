// The worker's view of processes, from /proc: what a host-tier server started outside its process group is
// found here before the server ends, and killed with it (instance.ts); the tests count processes the same way.
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';

/** One process as /proc shows it. */
export interface ProcessEntry {
  readonly pid: number;
  readonly ppid: number;
  /** Its process group. */
  readonly pgrp: number;
  /** Its session. */
  readonly session: number;
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
    found.push({ pid: Number(name), state: fields[0] ?? '', ppid: Number(fields[1]), pgrp: Number(fields[2]), session: Number(fields[3]), start: fields[19] ?? '', comm: stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')) });
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

/**
 * What descriptors `fds` of process `pid` are, as /proc names them (`pipe:[1234]`, a path…); those that cannot be
 * read (no /proc, the process gone) are left out.
 */
export function descriptorsOf(pid: number, fds: readonly number[]): Set<string> {
  const found = new Set<string>();
  for (const fd of fds) {
    try {
      found.add(readlinkSync(`/proc/${pid}/fd/${fd}`));
    } catch {
      // Not there: nothing to find it by.
    }
  }
  return found;
}

/**
 * Every process but `except` that holds a descriptor of one of `targets` (as
 * {@link descriptorsOf} names them): those the worker may look into, its
 * own user's. A pipe's holders are whoever can still write to it or read it.
 */
export function holdersOf(targets: ReadonlySet<string>, except: number): ProcessEntry[] {
  if (targets.size === 0) return [];
  return readTable().filter((entry) => entry.pid !== except && holdsAny(entry.pid, targets));
}

/** Whether process `pid` holds a descriptor of one of `targets`; false for one whose descriptors cannot be read. */
export function holdsAny(pid: number, targets: ReadonlySet<string>): boolean {
  let fds: string[];
  try {
    fds = readdirSync(`/proc/${pid}/fd`);
  } catch {
    return false;
  }
  return [...descriptorsOf(pid, fds.map(Number))].some((target) => targets.has(target));
}

function readTable(): ProcessEntry[] {
  try {
    return processTable();
  } catch {
    return [];
  }
}

/**
 * SIGKILLs a process group; one already gone is not an error. The group, never
 * the bare pid: once the leader is reaped its pid may belong to someone else,
 * while a group id stays taken as long as any member lives.
 */
export function killGroup(pgid: number): void {
  try {
    process.kill(-pgid, 'SIGKILL');
  } catch {
    // ESRCH: the whole group is gone already.
  }
}
