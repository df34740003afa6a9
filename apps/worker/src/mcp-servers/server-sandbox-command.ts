import { accessSync, constants, existsSync, lstatSync, readlinkSync, realpathSync, statSync } from 'node:fs';
import { isAbsolute, resolve } from 'node:path';
import { ConfigInvalidError } from '@forge-fleet/shared';
import { BWRAP_ISOLATION, BWRAP_PROC, UNSHARE_FLAGS } from '../sandbox/probe.js';
import { withRlimits } from '../sandbox/rlimits.js';
import { childDescriptor, PinnedPaths } from './pinned-paths.js';
import type { ServerSandboxProbe } from './server-sandbox-layers.js';
import { openSeccompFilter } from './seccomp-filter.js';
import { SERVER_LIMIT_DEFAULTS, type ServerLimits, type ServerSandbox } from './server-sandbox.js';

/**
 * The system's own files a program needs to start, bound read-only at their
 * own paths where they exist (a symlink, such as a merged-/usr `/bin`, is
 * recreated as the same symlink): programs and libraries, the dynamic
 * loader's cache and configuration, and Debian's alternatives (the targets
 * of `/usr/bin/awk` and the like). Nothing else of /etc — no passwd, hosts or
 * resolv.conf — nor /home, /run, /var or the host's /tmp: a server that needs
 * more declares it.
 */
export const SYSTEM_PATHS: readonly string[] = Object.freeze(['/usr', '/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32', '/etc/ld.so.cache', '/etc/ld.so.conf', '/etc/ld.so.conf.d', '/etc/alternatives']);

/** The search path glibc's `execvp` uses when `PATH` is not set: what the server's own exec would search. */
export const DEFAULT_EXEC_PATH = '/bin:/usr/bin';

/** The programs and probe findings a sandboxed server is started with (found once by findLaunchTools). */
export interface SandboxPrograms {
  /** `env` (coreutils): inside the view, removes the `PWD` bubblewrap sets. */
  readonly env: string;
  /** bubblewrap, when the probe found it working. */
  readonly bwrap: string | undefined;
  /** prlimit, when the probe found it. */
  readonly prlimit: string | undefined;
  /** unshare, when the probe found it working: the namespaces without bubblewrap. */
  readonly unshare: string | undefined;
  /** `setpriv` (util-linux): inside unshare's namespaces, drops the capabilities the user namespace gave the server. */
  readonly setpriv: string;
  readonly probe: ServerSandboxProbe;
}

/** One mount of the view, in the order bubblewrap makes them. */
interface Mount {
  readonly kind: '--ro-bind' | '--bind' | '--symlink';
  /** The host path bound (for a symlink: its target, as written). */
  readonly source: string;
  /** Where it appears in the view. */
  readonly target: string;
  /** A declared path: bound from a descriptor the launch opens (see pinned-paths.ts), not by name. */
  readonly declared?: true;
}

/** A sandboxed server's command line after the process-group and environment wrappers, and where to spawn it. */
export interface SandboxedCommand {
  readonly argv: readonly string[];
  /** The working directory to spawn in on the host: only without bubblewrap (with it, `--chdir` sets it inside the view). */
  readonly cwd: string | undefined;
  /**
   * Whether the server runs as PID 1 of a PID namespace that dies with it
   * (bubblewrap, or `unshare --pid --fork --kill-child`): everything it
   * starts goes with it, whatever session that process put itself in.
   */
  readonly pidNamespace: boolean;
  /**
   * The declared paths, opened for this launch: the process is spawned with
   * their descriptors after its stdio, and they are closed once it has started
   * (or failed to). Undefined without bubblewrap, which has no view to bind them in.
   */
  readonly pinned: PinnedPaths | undefined;
}

/**
 * The server's limits with the defaults for what it does not declare.
 *
 * @throws ConfigInvalidError naming each limit that is not a positive integer.
 */
export function resolveServerLimits(limits: Partial<ServerLimits> = {}): ServerLimits {
  const resolved: ServerLimits = { ...SERVER_LIMIT_DEFAULTS, ...limits };
  const problems = Object.entries(resolved)
    .filter(([, value]) => !Number.isSafeInteger(value) || value <= 0)
    .map(([name, value]) => `limits.${name} must be a positive integer, got ${String(value)}`);
  if (problems.length > 0) throw new ConfigInvalidError('MCP server sandbox', problems);
  return Object.freeze(resolved);
}

/**
 * `command args` confined by `sandbox`, outermost layer first: rlimits
 * (prlimit, or `sh -c ulimit`), then bubblewrap (namespaces, a view of the
 * system's files and the declared paths, dying with its parent, then `env -u
 * PWD` so that the server's environment is exactly the declared one) — or,
 * without it, `unshare` namespaces where they work. The caller puts the
 * process group, parent-death and environment wrappers around it.
 *
 * With bubblewrap the command is looked up here, on the declared `PATH` (or
 * {@link DEFAULT_EXEC_PATH}), among the files the view holds, so a command
 * the view lacks fails now with the path to declare rather than as an exit
 * inside the sandbox.
 *
 * The declared paths are bound from descriptors the worker opens now and
 * checks (pinned-paths.ts): the caller spawns the process with them and
 * closes them once it has started.
 *
 * @throws ConfigInvalidError for a relative or missing declared path, limits
 *   that are not positive integers, a working directory or command outside the view.
 * @throws UnavailableError for a declared path that no longer leads to itself (a symlink put in its place).
 */
export function sandboxedCommand(programs: SandboxPrograms, launch: { readonly server?: string | undefined; readonly command: string; readonly args: readonly string[]; readonly cwd?: string | undefined; readonly env: Readonly<Record<string, string>>; readonly sandbox: ServerSandbox }): SandboxedCommand {
  const limits = resolveServerLimits(launch.sandbox.limits);
  const rlimits = { cpuSeconds: limits.cpuSeconds, dataBytes: limits.memoryMb * 1024 * 1024, openFiles: limits.openFiles, processes: limits.processes };
  const limited = (command: readonly string[]): string[] => withRlimits(programs.probe, rlimits, command, programs.prlimit === undefined ? {} : { prlimit: programs.prlimit });
  if (programs.bwrap === undefined) {
    const command = [launch.command, ...launch.args];
    if (programs.unshare === undefined) return { argv: limited(command), cwd: launch.cwd, pidNamespace: false, pinned: undefined };
    // A /proc of the namespace's own where unshare can mount one: the host's would show every process of the machine.
    const proc = programs.probe.unshareProc === true ? ['--mount-proc'] : [];
    // unshare makes the server root of its user namespace, with every capability there: enough to unmount that
    // /proc (and see the host's again). It runs with none (bubblewrap's --cap-drop ALL, for this path).
    const noCapabilities = [programs.setpriv, '--bounding-set=-all', '--inh-caps=-all', '--'];
    return { argv: limited([programs.unshare, ...UNSHARE_FLAGS, ...proc, '--', ...noCapabilities, ...command]), cwd: launch.cwd, pidNamespace: true, pinned: undefined };
  }
  const mounts = viewMounts(launch.sandbox);
  const cwd = launch.cwd ?? '/';
  if (cwd !== '/' && !(isAbsolute(cwd) && isDirectory(cwd) && inView(cwd, mounts))) {
    throw new ConfigInvalidError('MCP server sandbox', [`working directory ${cwd} is not in the server's filesystem view: declare it (or a directory above it) under filesystem.read or filesystem.write`]);
  }
  const command = commandInView(launch.command, launch.env.PATH ?? DEFAULT_EXEC_PATH, cwd, mounts);
  if (!inView(programs.env, mounts)) throw new ConfigInvalidError('MCP server sandbox', [`${programs.env} (env, which starts the server inside the view) is not in the view: declare it under filesystem.read`]);
  // bubblewrap sets PWD after the environment it was given; a declared PWD is then the working directory.
  const unsetPwd = Object.hasOwn(launch.env, 'PWD') ? [] : ['-u', 'PWD'];
  // Last, once nothing else can refuse the launch: from here on the descriptors are the caller's to close.
  const declared = mounts.filter((m) => m.declared === true);
  const pinned = PinnedPaths.open(launch.server ?? 'server', declared.map((m) => m.source));
  // The process gets the i-th path opened as its descriptor childDescriptor(i): numbered here, where they are opened.
  const descriptorOf = new Map(declared.map((m, i) => [m, childDescriptor(i)]));
  let filter: number | undefined;
  try {
    filter = openSeccompFilter();
  } catch (error) {
    pinned.close();
    throw error;
  }
  const view = [
    ...BWRAP_ISOLATION,
    // No Unix socket of its own (seccomp-filter.ts): a read-only bind of a live socket would not stop a connect.
    ...(filter === undefined ? [] : ['--seccomp', String(pinned.hold(filter))]),
    ...BWRAP_PROC,
    '--dev',
    '/dev',
    '--tmpfs',
    '/tmp',
    ...mounts.flatMap((m) => {
      const fd = descriptorOf.get(m);
      return fd === undefined ? [m.kind, m.source, m.target] : [`${m.kind}-fd`, String(fd), m.target];
    }),
    // The view's own root (a tmpfs bubblewrap made) is read-only too: only `write` paths and /tmp take writes.
    '--remount-ro',
    '/',
    '--chdir',
    cwd,
  ];
  return { argv: limited([programs.bwrap, ...view, '--', programs.env, ...unsetPwd, '--', command, ...launch.args]), cwd: undefined, pidNamespace: true, pinned };
}

/**
 * The view's mounts: the system's paths, then the declared ones, shallower
 * first so that a `write` path inside a `read` one (or the reverse) stays as
 * declared; a path declared both ways is writable.
 */
function viewMounts(sandbox: ServerSandbox): Mount[] {
  const problems: string[] = [];
  const declared = (paths: readonly string[], kind: '--ro-bind' | '--bind', field: string): Mount[] =>
    paths.flatMap((path, i) => {
      if (!isAbsolute(path)) problems.push(`filesystem.${field}[${i}] must be an absolute path, got ${path}`);
      else if (!existsSync(path)) problems.push(`filesystem.${field}[${i}]: ${path} does not exist (a sandbox cannot mount it)`);
      else return [{ kind, source: path, target: resolve(path) }];
      return [];
    });
  const own = [...declared(sandbox.read, '--ro-bind', 'read'), ...declared(sandbox.write, '--bind', 'write')];
  if (problems.length > 0) throw new ConfigInvalidError('MCP server sandbox', problems);
  const depth = (m: Mount): number => (m.target === '/' ? 0 : m.target.split('/').length);
  // A stable sort: at equal depth, read paths (listed first) come before write paths.
  own.sort((a, b) => depth(a) - depth(b));
  return [...systemMounts(), ...own.map((m) => ({ ...m, declared: true as const }))];
}

function systemMounts(): Mount[] {
  return SYSTEM_PATHS.flatMap((path): Mount[] => {
    try {
      const stat = lstatSync(path);
      return [stat.isSymbolicLink() ? { kind: '--symlink', source: readlinkSync(path), target: path } : { kind: '--ro-bind', source: path, target: path }];
    } catch {
      return [];
    }
  });
}

/**
 * Whether `path` exists in the view: it lies under a mount's target, and what
 * it resolves to on the host lies under what a bind mount binds (so a symlink
 * out of the declared paths does not count).
 */
function inView(path: string, mounts: readonly Mount[]): boolean {
  const under = (p: string, root: string): boolean => root === '/' || p === root || p.startsWith(`${root}/`);
  const absolute = resolve(path);
  if (!mounts.some((m) => under(absolute, m.target))) return false;
  let real: string;
  try {
    real = realpathSync(absolute);
  } catch {
    return false;
  }
  return mounts.some((m) => m.kind !== '--symlink' && under(real, realOrSelf(m.source)));
}

function realOrSelf(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    return path;
  }
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

function isExecutableFile(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

/**
 * The absolute path the server's command has in the view, found the way
 * `execvp` would find it there: a name with a slash as it is (from `cwd`),
 * any other on `searchPath`, skipping what exists on the host but not in the view.
 *
 * @throws ConfigInvalidError naming the path to declare, or saying it is found nowhere.
 */
function commandInView(command: string, searchPath: string, cwd: string, mounts: readonly Mount[]): string {
  const candidates = command.includes('/') ? [resolve(cwd, command)] : searchPath.split(':').map((dir) => resolve(cwd, dir, command));
  let outside: string | undefined;
  for (const candidate of candidates) {
    if (!isExecutableFile(candidate)) continue;
    if (inView(candidate, mounts)) return candidate;
    outside ??= candidate;
  }
  if (outside !== undefined) {
    const real = realOrSelf(outside);
    throw new ConfigInvalidError('MCP server sandbox', [
      `command '${command}' is ${outside}${real === outside ? '' : ` (${real})`}, outside the server's filesystem view: declare ${real} (or the directory holding it and what it loads) under filesystem.read`,
    ]);
  }
  const where = command.includes('/') ? `at ${candidates[0] ?? command}` : `on the declared PATH (${searchPath})`;
  throw new ConfigInvalidError('MCP server sandbox', [`command '${command}' is not an executable file ${where}`]);
}
