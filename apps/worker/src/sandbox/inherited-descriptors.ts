// Descriptors this process inherited without close-on-exec reach every process it spawns: libuv closes none in a
// child, and Node marks only descriptors 0 to 15 close-on-exec at start (uv_disable_stdio_inheritance). QA started
// a fleet from a shell with `200</ 201</tmp/secret.txt`: a sandboxed MCP server read the secret through 201 and the
// host's files with openat(200, …), past its filesystem view, because bubblewrap, prlimit, setpriv and unshare pass
// descriptors on too. Node has no fcntl to set the flag, so the worker closes them before it spawns anything; every
// descriptor it opens itself is close-on-exec already, and spawn sets each child's stdio.
import { closeSync, readdirSync, readFileSync } from 'node:fs';

/** Linux's O_CLOEXEC, as the `flags:` line of /proc/<pid>/fdinfo/<fd> shows it (octal; the same on x86, Arm, POWER and s390). */
const O_CLOEXEC = 0o2000000;

/** Where this process's descriptors are listed: Linux only. */
const PROC_SELF = '/proc/self';

/**
 * Whether a descriptor is close-on-exec, from the text of its
 * /proc/<pid>/fdinfo/<fd>; `undefined` when the text has no `flags:` line.
 */
export function closeOnExec(fdinfo: string): boolean | undefined {
  const flags = /^flags:\s*([0-7]+)\s*$/m.exec(fdinfo)?.[1];
  return flags === undefined ? undefined : (Number.parseInt(flags, 8) & O_CLOEXEC) !== 0;
}

/**
 * The descriptor of this process's IPC channel (a parent's `fork()` or
 * `stdio: 'ipc'`): Node removes NODE_CHANNEL_FD from the environment before
 * any module runs, and owns the descriptor through a handle, so closing it
 * under that handle would hand its number to the next file opened.
 */
function ipcChannelFd(): number | undefined {
  const fd = (process.channel as { fd?: unknown } | undefined)?.fd;
  return typeof fd === 'number' && fd >= 0 ? fd : undefined;
}

/**
 * The descriptors above stdio that this process holds without close-on-exec,
 * apart from `keep`, in ascending order; `undefined` where there is no
 * /proc/self/fdinfo (not Linux). A descriptor closed while it is looked at
 * (the listing's own) is left out.
 */
export function inheritedDescriptors(keep: readonly number[] = [], proc = PROC_SELF): number[] | undefined {
  let names: string[];
  try {
    names = readdirSync(`${proc}/fdinfo`);
  } catch {
    return undefined;
  }
  const found: number[] = [];
  for (const name of names) {
    const fd = Number(name);
    if (!Number.isInteger(fd) || fd < 3 || keep.includes(fd)) continue;
    let info: string;
    try {
      info = readFileSync(`${proc}/fdinfo/${name}`, 'utf8');
    } catch {
      continue;
    }
    // A descriptor whose flags cannot be read is left open: it cannot be told from one this process owns.
    if (closeOnExec(info) === false) found.push(fd);
  }
  return found.sort((a, b) => a - b);
}

/**
 * Closes every descriptor this process inherited without close-on-exec (all
 * but stdio and its IPC channel), so that no process it starts later gets
 * them. Call it first thing at start-up, before anything is spawned and before
 * any code could have opened a descriptor on purpose without the flag (Node
 * never does).
 *
 * @param keep descriptors to leave open although inherited. @defaultValue the IPC channel's, when there is one
 * @returns the descriptors closed, or `undefined` where there is no
 * /proc/self/fdinfo to find them (not Linux): nothing is closed there.
 */
export function closeInheritedDescriptors(keep: readonly number[] = [ipcChannelFd()].filter((fd) => fd !== undefined)): number[] | undefined {
  const found = inheritedDescriptors(keep);
  if (found === undefined) return undefined;
  const closed: number[] = [];
  for (const fd of found) {
    try {
      closeSync(fd);
      closed.push(fd);
    } catch {
      // Closed since it was found: nothing left to pass on.
    }
  }
  return closed;
}
