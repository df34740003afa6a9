import { closeSync, openSync, readlinkSync } from 'node:fs';
import { resolve } from 'node:path';
import { UnavailableError } from '@forge-fleet/shared';

/** Linux's O_PATH (the same on x86-64 and arm64): a descriptor that names a file or directory, opened without reading it. */
const O_PATH = 0o10000000;

/**
 * The declared paths of one launch of a sandboxed server, opened by the
 * worker itself and handed to bubblewrap as descriptors (`--ro-bind-fd`,
 * `--bind-fd`), so the view binds what was checked here and not what the
 * path names by the time bubblewrap reads it.
 *
 * A path is a name, and names change: one sandboxed server with a `write`
 * path can replace a directory there with a symlink to anywhere on the host
 * (the fleet's keys, say), and another server that declares that directory
 * would bind the symlink's target at its next launch. So each path is
 * opened, the descriptor's own path is read back from `/proc/self/fd`, and
 * the launch is refused unless the path leads to itself. The servers file
 * refuses a declared path that leads elsewhere (through a symlink) when it
 * is read (servers-file.ts), so this holds for every pool, fresh or not, and
 * for every worker that reads the file later, after a swap. The descriptor
 * pins that directory for the launch; no rename after the check can move it.
 */
export class PinnedPaths {
  readonly #fds: number[];
  #closed = false;

  private constructor(fds: number[]) {
    this.#fds = fds;
  }

  /**
   * Opens each of `paths` (absolute) and checks that it leads to itself.
   *
   * @throws UnavailableError naming the path and where it leads now, after closing what it opened.
   */
  static open(server: string, paths: readonly string[]): PinnedPaths {
    const fds: number[] = [];
    try {
      for (const path of paths) {
        let fd: number;
        try {
          fd = openSync(path, O_PATH);
        } catch (error) {
          throw new UnavailableError(`its declared path ${path} cannot be opened (${(error as NodeJS.ErrnoException).code ?? String(error)}): create it again`, { what: `MCP server '${server}'` });
        }
        fds.push(fd);
        const now = readlinkSync(`/proc/self/fd/${fd}`);
        const expected = resolve(path);
        if (now !== expected) {
          throw new UnavailableError(
            `its declared path ${path} now leads to ${now} (was it replaced by a symlink?): the server is not started with it, since a declared path is bound only where it leads to itself. Put the directory back at ${path}`,
            { what: `MCP server '${server}'` },
          );
        }
      }
    } catch (error) {
      for (const fd of fds) closeSync(fd);
      throw error;
    }
    return new PinnedPaths(fds);
  }

  /**
   * Takes `fd` into the launch too (the server sandbox's seccomp filter): it
   * follows the paths' descriptors, and is closed with them.
   *
   * @returns the number the launched process has for it.
   */
  hold(fd: number): number {
    this.#fds.push(fd);
    return childDescriptor(this.#fds.length - 1);
  }

  /** The worker's descriptors, in the order of the paths (then those it holds): the child gets them as 3, 4, … */
  get descriptors(): readonly number[] {
    return this.#fds;
  }

  /** Closes the descriptors once bubblewrap has made its mounts (the server answered, or the launch failed). Idempotent. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const fd of this.#fds) closeSync(fd);
  }
}

/** The descriptor number the launched process has for the `index`th pinned path: after its stdin, stdout and stderr. */
export function childDescriptor(index: number): number {
  return 3 + index;
}
