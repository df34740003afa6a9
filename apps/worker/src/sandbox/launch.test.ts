import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { DEFAULT_LIMITS, launchCommand, lifetimeCpuSeconds } from './launch.js';
import { BWRAP_FLAGS, librariesFromLdd, type ProbeResult } from './probe.js';
import { isolationOf } from './sandbox.js';

const LIBS = ['/lib/x86_64-linux-gnu/libc.so.6', '/lib64/ld-linux-x86-64.so.2'];
const unshareOnly: ProbeResult = { unshare: true, bubblewrap: false, setpriv: true, prlimit: true, shell: true, cgroupV2: undefined, nodeLibraries: LIBS };
const everything: ProbeResult = { ...unshareOnly, bubblewrap: true };
const nothing: ProbeResult = { unshare: false, bubblewrap: false, setpriv: false, prlimit: false, shell: false, cgroupV2: undefined, nodeLibraries: [] };
const limits = { ...DEFAULT_LIMITS, cpuSeconds: 2, memoryMb: 100, outputBytes: 4096 };
const base = { nodePath: '/usr/bin/node', bundlePath: '/tmp/b/sandbox.mjs', limits };
const NODE = [
  '/usr/bin/node',
  '--experimental-permission',
  '--allow-fs-read=/tmp/b/sandbox.mjs',
  '--max-old-space-size=100',
  '--disable-warning=ExperimentalWarning',
  '/tmp/b/sandbox.mjs',
  '{"outputBytes":4096}',
];
const PRLIMIT = [`--cpu=${lifetimeCpuSeconds(limits)}`, `--data=${(100 + 256) * 1024 * 1024}`, '--nofile=64', '--core=0', '--'];

describe('sandbox launch command', () => {
  it('nests rlimits, bubblewrap (a view of node, its libraries and the bundle, read-only) and the permission model', () => {
    const { file, args } = launchCommand({ ...base, probe: everything });
    expect(file).toBe('prlimit');
    const view = ['/usr/bin/node', ...LIBS, '/tmp/b/sandbox.mjs'].flatMap((path) => ['--ro-bind', path, path]);
    expect(args).toEqual([...PRLIMIT, 'bwrap', ...BWRAP_FLAGS, ...view, '--', ...NODE]);
    expect(BWRAP_FLAGS).toEqual(expect.arrayContaining(['--unshare-all', '--die-with-parent', '--new-session']));
    // Nothing writable and nothing of the host's /run, /var or /tmp is bound into the view.
    expect(args.some((a) => a === '--bind' || a === '--dev-bind' || /^\/(run|var|etc|home)/.test(a))).toBe(false);
    expect(args.some((a) => a.startsWith('--allow-child-process') || a.startsWith('--allow-fs-write') || a.startsWith('--allow-worker'))).toBe(false);
  });

  it('without bubblewrap, nests setpriv --pdeathsig and unshare namespaces instead', () => {
    const { file, args } = launchCommand({ ...base, probe: unshareOnly });
    expect(file).toBe('prlimit');
    expect(args).toEqual([...PRLIMIT, 'setpriv', '--pdeathsig', 'KILL', '--', 'unshare', '--user', '--map-root-user', '--net', '--pid', '--fork', '--kill-child', '--', ...NODE]);
  });

  it('falls back to sh ulimit without prlimit, and to bare node without namespaces', () => {
    const shell = launchCommand({ ...base, probe: { ...nothing, shell: true } });
    expect(shell.file).toBe('/bin/sh');
    // Run by Debian's /bin/sh (dash) as the launch would run it, the limits are those the process reads.
    const read = spawnSync('/bin/sh', ['-c', shell.args[1]!, 'forge-sandbox', 'cat', '/proc/self/limits'], { encoding: 'utf8' });
    expect(read.stderr).toBe('');
    expect(read.stdout).toMatch(new RegExp(`Max cpu time +${lifetimeCpuSeconds(limits)} +${lifetimeCpuSeconds(limits)} +seconds`));
    expect(read.stdout).toMatch(new RegExp(`Max data size +${(100 + 256) * 1024 * 1024} `));
    expect(read.stdout).toMatch(/Max open files +64 +64 /);
    expect(read.stdout).toMatch(/Max core file size +0 +/);
    expect(shell.args.slice(3, 5)).toEqual(['/usr/bin/node', '--experimental-permission']);
    const bare = launchCommand({ ...base, probe: nothing });
    expect(bare.file).toBe('/usr/bin/node');
    expect(bare.args[0]).toBe('--experimental-permission');
  });

  it('refuses liveness limits that make no sense', () => {
    expect(() => launchCommand({ ...base, probe: nothing, limits: { ...limits, livenessIntervalMs: 0 } })).toThrow(expect.objectContaining({ code: 'CONFIG_INVALID' }) as Error);
    expect(() => launchCommand({ ...base, probe: nothing, limits: { ...limits, livenessIntervalMs: 500, livenessTimeoutMs: 500 } })).toThrow(/livenessTimeoutMs/);
  });

  it('gives a process enough CPU-time rlimit for more than one full call', () => {
    expect(lifetimeCpuSeconds(DEFAULT_LIMITS)).toBeGreaterThan(DEFAULT_LIMITS.cpuSeconds);
    expect(lifetimeCpuSeconds({ ...limits, cpuSeconds: 0.5 })).toBe(3);
  });

  it('reads the libraries Node loads from ldd', () => {
    const ldd = [
      '\tlinux-vdso.so.1 (0x00007ffd)',
      '\tlibdl.so.2 => /lib/x86_64-linux-gnu/libdl.so.2 (0x00007f1)',
      '\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f2)',
      '\t/lib64/ld-linux-x86-64.so.2 (0x00007f3)',
      '\tlibmissing.so => not found',
    ].join('\n');
    expect(librariesFromLdd(ldd)).toEqual(['/lib/x86_64-linux-gnu/libdl.so.2', '/lib/x86_64-linux-gnu/libc.so.6', '/lib64/ld-linux-x86-64.so.2']);
  });

  it('reports what each probe result leaves in force', () => {
    expect(isolationOf(everything)).toEqual({
      network: 'namespace',
      processes: 'namespace',
      filesystem: 'bubblewrap+permission-model',
      orphans: 'killed',
      rlimits: 'prlimit',
      memory: 'heap+rlimit',
      cgroup: 'unavailable',
      environment: 'empty',
    });
    expect(isolationOf(unshareOnly)).toMatchObject({ network: 'namespace', processes: 'namespace', filesystem: 'permission-model', orphans: 'killed' });
    expect(isolationOf({ ...nothing, cgroupV2: '/sys/fs/cgroup/x' })).toMatchObject({
      network: 'none',
      processes: 'none',
      filesystem: 'permission-model',
      orphans: 'exit-on-channel-close',
      rlimits: 'none',
      memory: 'heap',
      cgroup: 'writable',
    });
  });
});
