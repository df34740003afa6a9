import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { deriveQueueKey, queueName } from '@forge-fleet/shared';

/** A fresh call-signing secret: the dispatcher's environment, and the platform worker's (its queue's key only). */
export function signingEnv(prefix: string): { dispatcher: Record<string, string>; platformWorker: Record<string, string> } {
  const secret = randomBytes(32);
  return {
    dispatcher: { FORGE_SIGNING_SECRET: secret.toString('base64url') },
    platformWorker: { FORGE_CALL_KEY: deriveQueueKey(secret, queueName(prefix, 'platform')).toString('base64url') },
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

/** Peak resident memory (VmHWM) of a process, in MB. */
export function peakRssMb(pid: number): number {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = Number(/VmHWM:\s+(\d+)/.exec(status)?.[1]);
    return Math.round((kb / 1024) * 10) / 10;
  } catch {
    return Number.NaN;
  }
}
