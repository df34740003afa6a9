import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DEFAULT_INHERITED_ENV_VARS, type StdioServerParameters } from '@modelcontextprotocol/sdk/client/stdio.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BWRAP_ISOLATION, UNSHARE_FLAGS } from '../sandbox/probe.js';
import { type LaunchTools, stdioLaunch } from './launch-command.js';
import { McpStdioLaunch } from './pool-options.js';
import { resolveServerLimits } from './server-sandbox-command.js';
import { SERVER_LIMIT_DEFAULTS, type ServerSandbox } from './server-sandbox.js';
import { subreaperWrapper } from './subreaper.js';

const everything = { bubblewrap: true, unshare: true, unshareProc: true, setpriv: true, prlimit: true, shell: true };
const tools: LaunchTools = {
  setsid: '/usr/bin/setsid',
  setpriv: '/usr/bin/setpriv',
  env: '/usr/bin/env',
  sh: '/bin/sh',
  perl: '/usr/bin/perl',
  bwrap: '/usr/bin/bwrap',
  prlimit: '/usr/bin/prlimit',
  unshare: '/usr/bin/unshare',
  probe: everything,
};
const withoutBwrap: LaunchTools = { ...tools, bwrap: undefined, probe: { ...everything, bubblewrap: false } };
const UNSET = DEFAULT_INHERITED_ENV_VARS.filter((name) => name !== 'PATH').flatMap((name) => ['-u', name]);
const WRAPPERS = ['/usr/bin/setpriv', '--pdeathsig', 'KILL', '--', '/usr/bin/env', ...UNSET, '--'];
/** Outside a PID namespace the server is made a child subreaper first (subreaper.ts). */
const HOST_WRAPPERS = ['/usr/bin/setpriv', '--pdeathsig', 'KILL', '--', ...subreaperWrapper('/usr/bin/perl'), '/usr/bin/env', ...UNSET, '--'];
/** The transport's parameters of `launch`, with whether the server's group gets a reaper beside it. */
function launchOf(programs: LaunchTools, of: McpStdioLaunch): StdioServerParameters & { needsReaper: boolean; descriptors: number } {
  const { parameters, needsReaper, pinned } = stdioLaunch(programs, of);
  const descriptors = pinned?.descriptors.length ?? 0;
  pinned?.close();
  return { ...parameters, needsReaper, descriptors };
}
const d = SERVER_LIMIT_DEFAULTS;
const PRLIMIT = ['/usr/bin/prlimit', `--cpu=${d.cpuSeconds}`, `--data=${d.memoryMb * 1024 * 1024}`, `--nofile=${d.openFiles}`, `--nproc=${d.processes}`, '--core=0', '--'];

let dir: string;
let data: string;
let out: string;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'forge-sandbox-command-'));
  data = join(dir, 'data');
  out = join(data, 'out');
  mkdirSync(out, { recursive: true });
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

function launch(sandbox: ServerSandbox | undefined, extra: Partial<McpStdioLaunch> = {}): McpStdioLaunch {
  return McpStdioLaunch.parse({ command: 'env', args: ['--version'], env: { PATH: '/nowhere:/usr/bin', TOKEN: 's3cret' }, ...extra, ...(sandbox === undefined ? {} : { sandbox }) });
}

/** The pairs `flag a b` of bubblewrap's mounts in `args`, in order. */
function mounts(args: readonly string[]): string[][] {
  const found: string[][] = [];
  args.forEach((arg, i) => {
    if (['--ro-bind', '--bind', '--ro-bind-fd', '--bind-fd', '--symlink'].includes(arg)) found.push([arg, args[i + 1] ?? '', args[i + 2] ?? '']);
  });
  return found;
}

describe('the launch command of an MCP server', () => {
  it('on the host tier, is the process-group, parent-death, subreaper and environment wrappers around the command, with a reaper beside it', () => {
    const params = launchOf(tools, launch(undefined, { cwd: dir }));
    expect(params.command).toBe('/usr/bin/setsid');
    expect(params.args).toEqual([...HOST_WRAPPERS, 'env', '--version']);
    expect(subreaperWrapper('/usr/bin/perl', 'x64').slice(0, 2)).toEqual(['/usr/bin/perl', '-e']);
    // Without perl, or on an architecture whose prctl number is not known, the server starts without it.
    expect(launchOf({ ...tools, perl: undefined }, launch(undefined)).args).toEqual([...WRAPPERS, 'env', '--version']);
    expect(subreaperWrapper('/usr/bin/perl', 'riscv64')).toEqual([]);
    expect(params.needsReaper).toBe(true);
    expect(params.cwd).toBe(dir);
  });

  it('sandboxed, nests rlimits, bubblewrap with a read-only view of the system and the declared paths, and env -u PWD', () => {
    const params = launchOf(tools, launch({ read: [data], write: [out] }, { cwd: data }));
    const args = params.args ?? [];
    expect(args.slice(0, WRAPPERS.length + PRLIMIT.length + 1)).toEqual([...WRAPPERS, ...PRLIMIT, '/usr/bin/bwrap']);
    expect(params.needsReaper).toBe(false);
    const bwrap = args.slice(WRAPPERS.length + PRLIMIT.length + 1);
    expect(bwrap.slice(0, BWRAP_ISOLATION.length)).toEqual([...BWRAP_ISOLATION]);
    expect(BWRAP_ISOLATION).toEqual(expect.arrayContaining(['--unshare-all', '--die-with-parent', '--new-session']));
    const view = mounts(bwrap);
    expect(view).toContainEqual(['--ro-bind', '/usr', '/usr']);
    // The declared paths come after the system's, the write path inside the read one after it, each bound from the
    // descriptor the worker opened and checked (3, 4, … in the launched process), not by a name that may change.
    expect(view.slice(-2)).toEqual([
      ['--ro-bind-fd', '3', data],
      ['--bind-fd', '4', out],
    ]);
    // After the paths' descriptors, the seccomp filter's (no Unix socket of its own: seccomp-filter.ts).
    expect(params.descriptors).toBe(3);
    expect(bwrap.join(' ')).toContain('--seccomp 5');
    // Nothing else is writable, and nothing of the host's home, /run, /var or /tmp is bound.
    expect(view.filter(([kind]) => kind === '--bind' || kind === '--bind-fd')).toHaveLength(1);
    expect(view.some(([, source]) => /^\/(run|var|home|root|tmp)(\/|$)/.test(source ?? '') && !(source ?? '').startsWith(dir))).toBe(false);
    expect(bwrap.join(' ')).toContain('--proc /proc --remount-ro /proc --dev /dev --tmpfs /tmp');
    expect(bwrap.join(' ')).toContain(`--remount-ro / --chdir ${data} -- /usr/bin/env -u PWD -- /usr/bin/env --version`);
    // The working directory is set inside the view, and values travel in the environment, never on the command line.
    expect(params.cwd).toBeUndefined();
    expect(params.env).toEqual({ PATH: '/nowhere:/usr/bin', TOKEN: 's3cret' });
    expect(args.some((a) => a.includes('s3cret'))).toBe(false);
  });

  it('applies the declared limits, and refuses ones that are not positive integers', () => {
    const args = launchOf(tools, launch({ read: [], write: [], limits: { cpuSeconds: 5, openFiles: 99 } })).args ?? [];
    expect(args).toEqual(expect.arrayContaining(['--cpu=5', '--nofile=99', `--data=${d.memoryMb * 1024 * 1024}`]));
    expect(() => resolveServerLimits({ memoryMb: 0, processes: 1.5 })).toThrow(/limits\.memoryMb must be a positive integer.*limits\.processes/);
  });

  it('refuses relative or missing paths, and a command or working directory outside the view', () => {
    const refuse = (sandbox: ServerSandbox, extra: Partial<McpStdioLaunch> = {}): (() => unknown) => () => launchOf(tools, launch(sandbox, extra));
    expect(refuse({ read: ['relative/dir'], write: [join(dir, 'missing')] })).toThrow(/filesystem\.read\[0\] must be an absolute path.*filesystem\.write\[0\]: .*missing does not exist/);
    expect(refuse({ read: [], write: [] }, { cwd: dir })).toThrow(new RegExp(`working directory ${dir} is not in the server's filesystem view`));
    expect(refuse({ read: [], write: [] }, { command: 'nothing-by-this-name' })).toThrow(/command 'nothing-by-this-name' is not an executable file on the declared PATH/);
    expect(refuse({ read: [], write: [] }, { command: 'env', env: { PATH: '/nowhere' } })).toThrow(/not an executable file on the declared PATH \(\/nowhere\)/);
    expect(() => resolveServerLimits({ openFiles: -1 })).toThrow(expect.objectContaining({ code: 'CONFIG_INVALID' }) as Error);
  });

  it('without bubblewrap, nests rlimits and unshare namespaces (no reaper: the PID namespace takes all), or rlimits alone and a reaper, around the command as given', () => {
    const sandbox = { read: [data], write: [] };
    const params = launchOf(withoutBwrap, launch(sandbox, { cwd: dir }));
    expect(params.args).toEqual([...WRAPPERS, ...PRLIMIT, '/usr/bin/unshare', ...UNSHARE_FLAGS, '--mount-proc', '--', '/usr/bin/setpriv', '--bounding-set=-all', '--inh-caps=-all', '--', 'env', '--version']);
    // Where unshare cannot mount a /proc, it runs without: the layer is reported missing (server-sandbox-layers.ts).
    expect(launchOf({ ...withoutBwrap, probe: { ...withoutBwrap.probe, unshareProc: false } }, launch(sandbox, { cwd: dir })).args).not.toContain('--mount-proc');
    expect(params.needsReaper).toBe(false);
    expect(params.cwd).toBe(dir);
    const bare = launchOf({ ...withoutBwrap, unshare: undefined, prlimit: undefined, probe: { ...withoutBwrap.probe, unshare: false, prlimit: false } }, launch(sandbox));
    expect(bare.needsReaper).toBe(true);
    expect((bare.args ?? []).slice(0, HOST_WRAPPERS.length)).toEqual(HOST_WRAPPERS);
    const shell = (bare.args ?? []).slice(HOST_WRAPPERS.length);
    expect(shell.slice(0, 2)).toEqual(['/bin/sh', '-c']);
    // Run by Debian's /bin/sh (dash) as the launch would run it, the limits are those the process reads.
    const read = spawnSync('/bin/sh', ['-c', shell[2]!, 'forge-sandbox', 'cat', '/proc/self/limits'], { encoding: 'utf8' });
    expect(read.stderr).toBe('');
    expect(read.stdout).toMatch(new RegExp(`Max cpu time +${d.cpuSeconds} +${d.cpuSeconds} +seconds`));
    expect(read.stdout).toMatch(new RegExp(`Max data size +${d.memoryMb * 1024 * 1024} `));
    expect(read.stdout).toMatch(new RegExp(`Max open files +${d.openFiles} +${d.openFiles} `));
    expect(read.stdout).toMatch(new RegExp(`Max processes +${d.processes} +${d.processes} `));
    expect(read.stdout).toMatch(/Max core file size +0 +/);
    expect(shell.slice(4)).toEqual(['env', '--version']);
  });
});
