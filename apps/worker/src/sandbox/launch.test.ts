import { describe, expect, it } from 'vitest';
import { DEFAULT_LIMITS, launchCommand, lifetimeCpuSeconds } from './launch.js';
import type { ProbeResult } from './probe.js';
import { isolationOf } from './sandbox.js';

const everything: ProbeResult = { unshare: true, prlimit: true, shell: true, cgroupV2: undefined };
const limits = { cpuSeconds: 2, memoryMb: 100, outputBytes: 4096 };
const base = { nodePath: '/usr/bin/node', bundlePath: '/tmp/b/sandbox.mjs', limits };

describe('sandbox launch command', () => {
  it('nests rlimits, namespaces and the permission model, granting the bundle alone', () => {
    const { file, args } = launchCommand({ ...base, probe: everything });
    expect(file).toBe('prlimit');
    expect(args).toEqual([
      `--cpu=${lifetimeCpuSeconds(limits)}`,
      `--data=${(100 + 256) * 1024 * 1024}`,
      '--nofile=64',
      '--core=0',
      '--',
      'unshare',
      '--user',
      '--map-root-user',
      '--net',
      '--pid',
      '--fork',
      '--kill-child',
      '--',
      '/usr/bin/node',
      '--experimental-permission',
      '--allow-fs-read=/tmp/b/sandbox.mjs',
      '--max-old-space-size=100',
      '--disable-warning=ExperimentalWarning',
      '/tmp/b/sandbox.mjs',
      '{"outputBytes":4096}',
    ]);
    expect(args.some((a) => a.startsWith('--allow-child-process') || a.startsWith('--allow-fs-write') || a.startsWith('--allow-worker'))).toBe(false);
  });

  it('falls back to sh ulimit without prlimit, and to bare node without namespaces', () => {
    const shell = launchCommand({ ...base, probe: { ...everything, prlimit: false, unshare: false } });
    expect(shell.file).toBe('/bin/sh');
    expect(shell.args[1]).toBe(`ulimit -t ${lifetimeCpuSeconds(limits)} -d ${(100 + 256) * 1024} -n 64 -c 0 && exec "$@"`);
    expect(shell.args.slice(3, 5)).toEqual(['/usr/bin/node', '--experimental-permission']);
    const bare = launchCommand({ ...base, probe: { unshare: false, prlimit: false, shell: false, cgroupV2: undefined } });
    expect(bare.file).toBe('/usr/bin/node');
    expect(bare.args[0]).toBe('--experimental-permission');
  });

  it('gives a process enough CPU-time rlimit for more than one full call', () => {
    expect(lifetimeCpuSeconds(DEFAULT_LIMITS)).toBeGreaterThan(DEFAULT_LIMITS.cpuSeconds);
    expect(lifetimeCpuSeconds({ ...limits, cpuSeconds: 0.5 })).toBe(3);
  });

  it('reports what each probe result leaves in force', () => {
    expect(isolationOf(everything)).toEqual({
      network: 'namespace',
      processes: 'namespace',
      filesystem: 'permission-model',
      rlimits: 'prlimit',
      memory: 'heap+rlimit',
      cgroup: 'unavailable',
      environment: 'empty',
    });
    expect(isolationOf({ unshare: false, prlimit: false, shell: false, cgroupV2: '/sys/fs/cgroup/x' })).toMatchObject({
      network: 'none',
      processes: 'none',
      rlimits: 'none',
      memory: 'heap',
      cgroup: 'writable',
    });
  });
});
