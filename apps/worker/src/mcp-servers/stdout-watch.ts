import { existsSync, readFileSync } from 'node:fs';
import { descendantsOf, descriptorsOf, holdsAny } from './process-tree.js';

/** How often a confined server is looked at. One look reads one process's descriptors: cheap, and rare enough. */
const WATCH_INTERVAL_MS = 1000;

/**
 * Watches whether a confined server still holds the pipe it answers on. A
 * server in a PID namespace is started by launchers that stay its parents
 * (bubblewrap's two processes, or unshare) and keep the pipe open too, so a
 * server that closes its stdout and runs on never gives the worker end of
 * file: its calls hung to their timeout. Here the server is the deepest of the
 * launch's processes that holds the pipe when it has started; once neither it
 * nor anything it started (the launchers aside) holds the pipe while it still
 * runs, `onClosed` is called once. A server that moved the pipe to another
 * descriptor still holds it; one that exits is left to the usual end.
 */
export class StdoutWatch {
  readonly #pipe: ReadonlySet<string>;
  readonly #root: number;
  readonly #launchers: ReadonlySet<number>;
  #server: number;
  readonly #timer: NodeJS.Timeout;

  private constructor(root: number, pipe: ReadonlySet<string>, launchers: ReadonlySet<number>, server: number, onClosed: () => void) {
    this.#root = root;
    this.#pipe = pipe;
    this.#launchers = launchers;
    this.#server = server;
    this.#timer = setInterval(() => {
      if (this.#holds()) return;
      this.stop();
      onClosed();
    }, WATCH_INTERVAL_MS);
    this.#timer.unref();
  }

  /** Starts watching the launch whose first process is `root`; undefined where /proc does not show its stdout. */
  static start(root: number, onClosed: () => void): StdoutWatch | undefined {
    const pipe = descriptorsOf(root, [1]);
    if (pipe.size === 0) return undefined;
    const holders = [root, ...descendantsOf(root).map((e) => e.pid)].filter((pid) => holdsAny(pid, pipe));
    const server = holders.at(-1);
    if (server === undefined || server === root) return undefined;
    return new StdoutWatch(root, pipe, new Set(holders.slice(0, -1)), server, onClosed);
  }

  stop(): void {
    clearInterval(this.#timer);
  }

  /** Whether the server (or, once it no longer does, what it started) still holds the pipe, or has exited. */
  #holds(): boolean {
    if (!runs(this.#server)) return true;
    if (holdsAny(this.#server, this.#pipe)) return true;
    const heir = descendantsOf(this.#root).find((e) => !this.#launchers.has(e.pid) && holdsAny(e.pid, this.#pipe));
    if (heir === undefined) return false;
    this.#server = heir.pid;
    return true;
  }
}

/** Whether `pid` runs (a zombie has exited: its end is the usual one's to tell). */
function runs(pid: number): boolean {
  if (!existsSync(`/proc/${pid}`)) return false;
  try {
    return !/^\d+ \(.*\) Z /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}
