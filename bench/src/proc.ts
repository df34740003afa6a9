import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { deriveQueueKey, generateTokenKeys, mintToken, queueName } from '@forge-fleet/shared';

/** The repository root: benchmark processes run from here. */
export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** A Node process started by a benchmark, with everything it printed so far. */
export interface Spawned {
  readonly child: ChildProcess;
  out: string;
}

/** Starts `node <args>` in the repository root with `env` added, collecting its stdout and stderr. */
export function spawnNode(args: readonly string[], env: Record<string, string> = {}): Spawned {
  const child = spawn(process.execPath, args, { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  const spawned: Spawned = { child, out: '' };
  child.stdout?.on('data', (d: Buffer) => (spawned.out += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (spawned.out += d.toString()));
  return spawned;
}

/** Polls `check` every 20 ms until it holds (a check that throws has not held yet). @throws after `timeoutMs` */
export async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await Promise.resolve().then(check).catch(() => false))) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * Fresh keys for a benchmark fleet, as `npm start` makes them: the
 * dispatcher's signing secret and token public key, the platform worker's
 * queue key, a token for the agents, and `callers` tokens of distinct
 * subjects. The fleet arm runs the production path: every request is
 * authenticated, every call signed and verified.
 */
export async function fleetSecrets(
  prefix: string,
  callers = 0,
): Promise<{ dispatcher: Record<string, string>; platformWorker: Record<string, string>; agent: Record<string, string>; callerTokens: string[] }> {
  const secret = randomBytes(32);
  const tokenKeys = generateTokenKeys();
  const mint = (subject: string) => mintToken(tokenKeys.privateKeyPem, { subject, expiresInSeconds: 3600 });
  return {
    dispatcher: { FORGE_SIGNING_SECRET: secret.toString('base64url'), FORGE_TOKEN_PUBLIC_KEY: tokenKeys.publicKeyPem },
    platformWorker: { FORGE_CALL_KEY: deriveQueueKey(secret, queueName(prefix, 'platform')).toString('base64url') },
    agent: { FORGE_TOKEN: await mint('bench-agent') },
    // Distinct subjects: the sandbox gives each caller processes of its own (docs/sandbox.md).
    callerTokens: await Promise.all(Array.from({ length: callers }, (_, i) => mint(`bench-caller-${i}`))),
  };
}

/**
 * The arguments that run a bin file with `node` as its shebang would: the
 * Node flags on its `#!/usr/bin/env -S node …` line, then the file. The
 * worker's heap tuning lives there, so what the benchmark runs is what
 * ships.
 */
export function nodeArgsFor(bin: string): string[] {
  const first = readFileSync(bin, 'utf8').split('\n', 1)[0] ?? '';
  const flags = /^#!.*\bnode\b(.*)$/.exec(first)?.[1]?.trim().split(/\s+/).filter(Boolean) ?? [];
  return [...flags, bin];
}

/** Clock ticks per second for /proc/<pid>/stat (USER_HZ; 100 on every Linux we run on). */
const TICKS_PER_SECOND = 100;

/** CPU time (user + system) a process has used, in milliseconds, from /proc. */
export function cpuMs(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may contain spaces; fields after its closing paren are fixed.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const utime = Number(fields[11]);
    const stime = Number(fields[12]);
    return ((utime + stime) * 1000) / TICKS_PER_SECOND;
  } catch {
    return Number.NaN;
  }
}

/** The process's descendants (sandbox processes of a worker, under their `unshare`), from /proc. */
export function descendants(pid: number): number[] {
  const found: number[] = [];
  const visit = (p: number): void => {
    let children: number[] = [];
    try {
      for (const task of readdirSync(`/proc/${p}/task`)) {
        children = children.concat(readFileSync(`/proc/${p}/task/${task}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number));
      }
    } catch {
      return;
    }
    for (const child of children) {
      found.push(child);
      visit(child);
    }
  };
  visit(pid);
  return found;
}

/** CPU time (user + system) of the children a process has reaped — with theirs — in milliseconds. */
function reapedCpuMs(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[13]) + Number(fields[14])) * 1000) / TICKS_PER_SECOND;
  } catch {
    return Number.NaN;
  }
}

/**
 * CPU time of a process and everything it started (a worker and its sandbox
 * processes), in milliseconds: the live ones' own time plus what each has
 * reaped, so processes that ended meanwhile (a sandbox process per call) are
 * counted too.
 */
export function treeCpuMs(pid: number): number {
  return [pid, ...descendants(pid)].reduce((sum, p) => {
    const ms = cpuMs(p) + reapedCpuMs(p);
    return Number.isNaN(ms) ? sum : sum + ms;
  }, 0);
}

/** A memory figure of a process from /proc/<pid>/status (`VmHWM`: peak resident, `VmRSS`: resident now), in MB. */
function statusMb(pid: number, field: 'VmHWM' | 'VmRSS'): number {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)?.[1]);
    return Math.round((kb / 1024) * 10) / 10;
  } catch {
    return Number.NaN;
  }
}

/** Peak resident memory (VmHWM) of a process, in MB. */
export function peakRssMb(pid: number): number {
  return statusMb(pid, 'VmHWM');
}

/** Resident memory (VmRSS) of a process now, in MB. */
export function rssMb(pid: number): number {
  return statusMb(pid, 'VmRSS');
}

/**
 * The sandbox processes under a worker, as the window closes: how many Node
 * processes (their `unshare`/`prlimit` wrappers not counted) and their
 * resident memory together, in MB (shared pages counted in each).
 */
export function sandboxFootprint(workerPid: number): { processes: number; rssMb: number } {
  let processes = 0;
  let rss = 0;
  for (const pid of descendants(workerPid)) {
    let comm: string;
    try {
      comm = readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
    } catch {
      continue;
    }
    if (comm !== 'node' && !comm.startsWith('node')) continue;
    processes += 1;
    const mb = rssMb(pid);
    if (!Number.isNaN(mb)) rss += mb;
  }
  return { processes, rssMb: Math.round(rss) };
}
