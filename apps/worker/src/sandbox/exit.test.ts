import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cpuSecondsFromStat, errorForExit } from './exit.js';
import { probeCgroupV2 } from './probe.js';

describe('sandbox process exits', () => {
  it('names a CPU rlimit kill, whether seen as a signal or as a shell status', () => {
    for (const exit of [
      { code: null, signal: 'SIGXCPU' as const, stderr: '' },
      { code: 152, signal: null, stderr: '' },
    ]) {
      expect(errorForExit('t', exit, 64)).toMatchObject({ code: 'RESOURCE_LIMIT', details: { toolName: 't', limit: 'cpu' } });
    }
  });

  it('names a V8 heap abort as a memory limit', () => {
    const stderr = '<--- Last few GCs --->\nFATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory\n';
    expect(errorForExit('t', { code: null, signal: 'SIGABRT', stderr }, 64)).toMatchObject({
      code: 'RESOURCE_LIMIT',
      details: { limit: 'memory' },
      message: expect.stringContaining('64 MiB') as string,
    });
  });

  it('reports any other death as EXECUTION_FAILED with the last line of stderr', () => {
    const error = errorForExit('t', { code: 7, signal: null, stderr: 'noise\nTypeError: boom\n' }, 64);
    expect(error).toMatchObject({ code: 'EXECUTION_FAILED', details: { sandboxExit: { code: 7, signal: null } } });
    expect(error.message).toContain('exit code 7');
    expect(error.message).toContain('TypeError: boom');
  });

  it('reads CPU time from /proc/<pid>/stat, even with spaces and parentheses in the command name', () => {
    const stat = '4242 (node (x) y) S 1 4242 4242 0 -1 4194560 2587 0 0 0 150 25 0 0 20 0 11 0 100 1000 100';
    expect(cpuSecondsFromStat(stat)).toBe(1.75);
    expect(cpuSecondsFromStat('garbage')).toBeUndefined();
  });
});

describe('cgroup v2 probe', () => {
  it('finds no cgroup v2 where cgroup.controllers is missing', () => {
    const root = mkdtempSync(join(tmpdir(), 'forge-cgroup-'));
    try {
      expect(probeCgroupV2(root)).toBeUndefined();
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });

  it('returns this process\'s own cgroup directory when it is writable', () => {
    const root = mkdtempSync(join(tmpdir(), 'forge-cgroup-'));
    try {
      const own = readFileSync('/proc/self/cgroup', 'utf8').split('\n').find((l) => l.startsWith('0::'))?.slice(3) ?? '/missing';
      writeFileSync(join(root, 'cgroup.controllers'), 'cpu memory pids');
      mkdirSync(join(root, own), { recursive: true });
      expect(probeCgroupV2(root)).toBe(join(root, own));
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
