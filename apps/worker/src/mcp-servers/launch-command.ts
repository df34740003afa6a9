import { spawnSync } from 'node:child_process';
import { ConfigInvalidError } from '@forge-fleet/shared';
import { DEFAULT_INHERITED_ENV_VARS, type StdioServerParameters } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { McpStdioLaunch } from './pool-options.js';
import type { PinnedPaths } from './pinned-paths.js';
import { type SandboxPrograms, sandboxedCommand } from './server-sandbox-command.js';
import { subreaperWrapper } from './subreaper.js';
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
  /** `sh`: runs the reaper of a host server's process group (group-reaper.ts). */
  readonly sh: string;
  /** `perl`, when the worker's PATH has it: makes a host server a child subreaper (subreaper.ts). */
  readonly perl: string | undefined;
}

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
    perl: optional('perl', true),
    bwrap: optional('bwrap', probe.bubblewrap),
    prlimit: optional('prlimit', probe.prlimit),
    unshare: optional('unshare', probe.unshare),
    probe: Object.freeze({ bubblewrap: probe.bubblewrap, unshare: probe.unshare, unshareProc: probe.unshareProc === true, setpriv: probe.setpriv, prlimit: probe.prlimit, shell: probe.shell }),
  };
  if (problems.length > 0) throw new ConfigInvalidError('MCP server launch', problems);
  return Object.freeze(tools);
}

/** How to start one stdio server. */
export interface StdioLaunch {
  /** For the SDK's StdioClientTransport. */
  readonly parameters: StdioServerParameters;
  /**
   * Whether the server's group needs a {@link GroupReaper} beside it: true
   * unless a PID namespace (bubblewrap, or `unshare --pid`) takes all it
   * starts with it.
   */
  readonly needsReaper: boolean;
  /** A sandboxed server's declared paths, opened for this launch: spawned with as its descriptors 3, 4, …, closed once it started (see pinned-paths.ts). */
  readonly pinned: PinnedPaths | undefined;
}

/**
 * How to start `launch`: `setsid setpriv --pdeathsig KILL [perl -e …] env -u …
 * -- command args`. Each wrapper execs the next, so the transport's pid is the server's:
 * - `setsid`: its own session and process group, so the pool can kill the
 *   server with everything it started, and a terminal's signals stay out;
 * - `setpriv --pdeathsig KILL`: the kernel kills it when the worker dies, even
 *   by SIGKILL (and, outside a PID namespace, the group's reaper kills the rest
 *   of its group then: group-reaper.ts);
 * - `perl -e …` (outside a PID namespace, where perl is found): makes the
 *   server a child subreaper, so a daemon it starts stays its descendant
 *   (subreaper.ts);
 * - `env -u`: the transport always adds some of the worker's variables
 *   (HOME, PATH, USER…); those not declared are removed by name, so values
 *   (secrets) never appear on a command line and the server sees exactly `launch.env`.
 *
 * With `launch.sandbox`, `command args` run confined (server-sandbox-command.ts):
 * `… env -u … -- prlimit … -- bwrap … -- env -u PWD -- command args`. The
 * transport's pid is then bubblewrap's, the leader of the group the pool
 * kills: with it goes the PID namespace, and everything the server started.
 *
 * @param server the server's name, for messages.
 * @throws ConfigInvalidError when a sandboxed server's view cannot hold its command or working directory (see sandboxedCommand).
 * @throws UnavailableError when a sandboxed server's declared path no longer leads where it did (see pinned-paths.ts).
 */
export function stdioLaunch(tools: LaunchTools, launch: McpStdioLaunch, server?: string): StdioLaunch {
  const unset = DEFAULT_INHERITED_ENV_VARS.filter((name) => !Object.hasOwn(launch.env, name)).flatMap((name) => ['-u', name]);
  // The environment is cleaned before any sandbox layer starts: bubblewrap's own environment is readable as /proc/1/environ inside.
  const { argv, cwd, pidNamespace, pinned } =
    launch.sandbox === undefined ? { argv: [launch.command, ...launch.args], cwd: launch.cwd, pidNamespace: false, pinned: undefined } : sandboxedCommand(tools, { ...launch, server, sandbox: launch.sandbox });
  // Outside a PID namespace, what the server orphans (a daemon) would go to PID 1: the server adopts it instead.
  const subreaper = pidNamespace ? [] : subreaperWrapper(tools.perl);
  const wrappers = [tools.setpriv, '--pdeathsig', 'KILL', '--', ...subreaper, tools.env, ...unset, '--'];
  return {
    parameters: {
      command: tools.setsid,
      args: [...wrappers, ...argv],
      env: { ...launch.env },
      ...(cwd === undefined ? {} : { cwd }),
      stderr: 'pipe',
    },
    needsReaper: !pidNamespace,
    pinned,
  };
}
