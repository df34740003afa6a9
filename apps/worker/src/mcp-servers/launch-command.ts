import { spawnSync } from 'node:child_process';
import { ConfigInvalidError } from '@forge-fleet/shared';
import { DEFAULT_INHERITED_ENV_VARS, type StdioServerParameters } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { ProbeResult } from '../sandbox/probe.js';
import type { McpStdioLaunch } from './pool-options.js';

/** Where the wrappers of a server process live, found once on the worker's own PATH. */
export interface LaunchTools {
  /** `setsid` (util-linux): gives the server a session, hence a process group, of its own. */
  readonly setsid: string;
  /** `setpriv` (util-linux): sets SIGKILL as the server's parent-death signal. */
  readonly setpriv: string;
  /** `env` (coreutils): removes what the SDK's transport adds to the environment. */
  readonly env: string;
}

/**
 * Finds the wrappers, using the sandbox's probe for `setpriv --pdeathsig` (the
 * same layer the sandbox relies on without bubblewrap).
 *
 * @param searchPath the worker's PATH, where the wrappers (not the server) are looked up.
 * @throws ConfigInvalidError when one is missing: a server that could outlive its worker is not started.
 */
export function findLaunchTools(probe: Pick<ProbeResult, 'setpriv'>, searchPath: string): LaunchTools {
  const problems: string[] = [];
  if (!probe.setpriv) problems.push('setpriv --pdeathsig does not work here (install util-linux): without it a server would outlive a killed worker');
  const found = (name: string): string => {
    const run = spawnSync('/bin/sh', ['-c', `command -v ${name}`], { encoding: 'utf8', timeout: 5_000, env: { PATH: searchPath } });
    const path = run.status === 0 ? run.stdout.trim() : '';
    if (!path.startsWith('/')) problems.push(`${name} is not on the worker's PATH (install ${name === 'env' ? 'coreutils' : 'util-linux'})`);
    return path;
  };
  const tools = { setsid: found('setsid'), setpriv: found('setpriv'), env: found('env') };
  if (problems.length > 0) throw new ConfigInvalidError('MCP server launch', problems);
  return Object.freeze(tools);
}

/**
 * The parameters for the SDK's StdioClientTransport that start `launch` as
 * `setsid setpriv --pdeathsig KILL env -u … -- command args`. Each wrapper
 * execs the next, so the transport's pid is the server's:
 * - `setsid`: its own session and process group, so the pool can kill the
 *   server with everything it started, and a terminal's signals stay out;
 * - `setpriv --pdeathsig KILL`: the kernel kills it when the worker dies, even by SIGKILL;
 * - `env -u`: the transport always adds some of the worker's variables
 *   (HOME, PATH, USER…); those not declared are removed by name, so values
 *   (secrets) never appear on a command line and the server sees exactly `launch.env`.
 */
export function stdioLaunchParameters(tools: LaunchTools, launch: McpStdioLaunch): StdioServerParameters {
  const unset = DEFAULT_INHERITED_ENV_VARS.filter((name) => !Object.hasOwn(launch.env, name)).flatMap((name) => ['-u', name]);
  return {
    command: tools.setsid,
    args: [tools.setpriv, '--pdeathsig', 'KILL', '--', tools.env, ...unset, '--', launch.command, ...launch.args],
    env: { ...launch.env },
    ...(launch.cwd === undefined ? {} : { cwd: launch.cwd }),
    stderr: 'pipe',
  };
}
