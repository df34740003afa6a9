import { spawnSync } from 'node:child_process';
import { ConfigInvalidError } from '@forge-fleet/shared';
import { DEFAULT_INHERITED_ENV_VARS, type StdioServerParameters } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { McpStdioLaunch } from './pool-options.js';
import { type SandboxPrograms, sandboxedCommand } from './server-sandbox-command.js';
import type { ServerSandboxProbe } from './server-sandbox-layers.js';

/**
 * Where the wrappers of a server process live, found once on the worker's own
 * PATH, with the sandbox's programs (those the probe found working) for
 * Platform- and Embedded-tier servers.
 */
export interface LaunchTools extends SandboxPrograms {
  /** `setsid` (util-linux): gives the server a session, hence a process group, of its own. */
  readonly setsid: string;
  /** `setpriv` (util-linux): sets SIGKILL as the server's parent-death signal. */
  readonly setpriv: string;
  /** `env` (coreutils): removes what the SDK's transport adds to the environment. */
  readonly env: string;
  /** `sh`: runs the reaper of a server's process group (see {@link stdioLaunchParameters}). */
  readonly sh: string;
  /** `sleep` (coreutils): what the reaper waits in. */
  readonly sleep: string;
}

/**
 * Started beside a server outside bubblewrap, before the server is exec'd,
 * in a session and process group of its own (so that it is no member of the
 * server's group, and a count of that group is a count of the server's
 * processes): `setpriv --pdeathsig TERM` makes the kernel signal it when the
 * server (its parent) dies, for whatever reason — the worker's SIGKILL
 * killing the server included — and its trap then SIGKILLs the server's
 * process group, then its own (itself and its sleep). So a helper the server
 * started in its group (a browser, a language server) that never reads the
 * server's stdin, and so would not notice, dies too. A server that died
 * before the parent-death signal was set is seen by the parent check. `$1` is
 * the server's pid (its group's id), `$2` sleep's path.
 */
const REAPER_SCRIPT = `reap() { kill -s KILL -- -"$1" 2>/dev/null; kill -s KILL 0; }; trap 'reap "$1"' TERM; [ "$PPID" = "$1" ] || reap "$1"; while :; do "$2" 86400 & wait $!; done`;

/**
 * The first process of the group (`setsid sh -c`): starts the reaper in the
 * background, with no stdio of the server's (it must not hold the server's
 * pipes open), then execs the server's wrappers, so the server keeps this
 * pid: the group's leader, the transport's child, the worker's child.
 */
const LAUNCH_SCRIPT = `setsid=$1 setpriv=$2 sh=$3 sleep=$4 reaper=$5; shift 5; "$setsid" "$setpriv" --pdeathsig TERM -- "$sh" -c "$reaper" forge-mcp-reaper "$$" "$sleep" </dev/null >/dev/null 2>&1 & exec "$@"`;

/**
 * Finds the wrappers, using the sandbox's probe for `setpriv --pdeathsig` (the
 * same layer the sandbox relies on without bubblewrap) and for the layers of
 * sandboxed servers (bubblewrap, unshare, prlimit: see serverSandboxLayers).
 *
 * @param searchPath the worker's PATH, where the wrappers (not the server) are looked up.
 * @throws ConfigInvalidError when one is missing: a server that could outlive its worker is not started.
 */
export function findLaunchTools(probe: ServerSandboxProbe, searchPath: string): LaunchTools {
  const problems: string[] = [];
  if (!probe.setpriv) problems.push('setpriv --pdeathsig does not work here (install util-linux): without it a server would outlive a killed worker');
  const lookUp = (name: string): string => {
    const run = spawnSync('/bin/sh', ['-c', `command -v ${name}`], { encoding: 'utf8', timeout: 5_000, env: { PATH: searchPath } });
    return run.status === 0 ? run.stdout.trim() : '';
  };
  const required = (name: string, pkg: string): string => {
    const path = lookUp(name);
    if (!path.startsWith('/')) problems.push(`${name} is not on the worker's PATH (install ${pkg})`);
    return path;
  };
  // The probe ran these from the same PATH; one it found working is there.
  const optional = (name: string, works: boolean): string | undefined => {
    const path = works ? lookUp(name) : '';
    return path.startsWith('/') ? path : undefined;
  };
  const tools: LaunchTools = {
    setsid: required('setsid', 'util-linux'),
    setpriv: required('setpriv', 'util-linux'),
    env: required('env', 'coreutils'),
    sh: required('sh', 'dash'),
    sleep: required('sleep', 'coreutils'),
    bwrap: optional('bwrap', probe.bubblewrap),
    prlimit: optional('prlimit', probe.prlimit),
    unshare: optional('unshare', probe.unshare),
    probe: Object.freeze({ bubblewrap: probe.bubblewrap, unshare: probe.unshare, setpriv: probe.setpriv, prlimit: probe.prlimit, shell: probe.shell }),
  };
  if (problems.length > 0) throw new ConfigInvalidError('MCP server launch', problems);
  return Object.freeze(tools);
}

/**
 * The parameters for the SDK's StdioClientTransport that start `launch` as
 * `setsid setpriv --pdeathsig KILL env -u … -- command args`. Each wrapper
 * execs the next, so the transport's pid is the server's (outside
 * bubblewrap, `setsid sh -c` first starts the group's reaper, then execs
 * the rest: see {@link REAPER_SCRIPT}):
 * - `setsid`: its own session and process group, so the pool can kill the
 *   server with everything it started, and a terminal's signals stay out;
 * - `setpriv --pdeathsig KILL`: the kernel kills it when the worker dies, even by SIGKILL;
 * - `env -u`: the transport always adds some of the worker's variables
 *   (HOME, PATH, USER…); those not declared are removed by name, so values
 *   (secrets) never appear on a command line and the server sees exactly `launch.env`.
 *
 * With `launch.sandbox`, `command args` run confined (server-sandbox-command.ts):
 * `… env -u … -- prlimit … -- bwrap … -- env -u PWD -- command args`. The
 * transport's pid is then bubblewrap's, the leader of the group the pool
 * kills: with it goes the PID namespace, and everything the server started.
 *
 * @throws ConfigInvalidError when a sandboxed server's view cannot hold its command or working directory (see sandboxedCommand).
 */
export function stdioLaunchParameters(tools: LaunchTools, launch: McpStdioLaunch): StdioServerParameters {
  // PWD: the shell that starts the reaper exports one.
  const unset = [...DEFAULT_INHERITED_ENV_VARS, 'PWD'].filter((name) => !Object.hasOwn(launch.env, name)).flatMap((name) => ['-u', name]);
  // The environment is cleaned before any sandbox layer starts: bubblewrap's own environment is readable as /proc/1/environ inside.
  const wrappers = [tools.setpriv, '--pdeathsig', 'KILL', '--', tools.env, ...unset, '--'];
  const { argv, cwd, pidNamespace } = launch.sandbox === undefined ? { argv: [launch.command, ...launch.args], cwd: launch.cwd, pidNamespace: false } : sandboxedCommand(tools, { ...launch, sandbox: launch.sandbox });
  // A PID namespace already takes everything the server starts with it, whatever its group.
  const reaped = pidNamespace ? [] : [tools.sh, '-c', LAUNCH_SCRIPT, 'forge-mcp-launch', tools.setsid, tools.setpriv, tools.sh, tools.sleep, REAPER_SCRIPT];
  return {
    command: tools.setsid,
    args: [...reaped, ...wrappers, ...argv],
    env: { ...launch.env },
    ...(cwd === undefined ? {} : { cwd }),
    stderr: 'pipe',
  };
}
