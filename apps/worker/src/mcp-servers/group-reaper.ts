import { type ChildProcess, spawn } from 'node:child_process';
import { setTimeout as delay } from 'node:timers/promises';

/**
 * Reads its stdin until end of file, then SIGKILLs the process group `$1`.
 * Only the worker holds the other end of that pipe, so end of file means the
 * worker is gone, whatever killed it (SIGKILL included): no signal to catch,
 * no timer, no child of its own that could be orphaned.
 */
const REAPER_SCRIPT = `read _ || :; kill -s KILL -- -"$1" 2>/dev/null`;

/** What the reaper is called in `ps` (its `$0`). */
export const REAPER_NAME = 'forge-mcp-reaper';

/**
 * The keeper of one host-tier server's process group for the case the
 * worker cannot handle itself: its own death. A helper the server started in
 * its group (a browser, a language server) that never reads the server's
 * stdin would not notice the server die with the worker, and would live on
 * under PID 1.
 *
 * The reaper is the worker's child, not the server's: when the worker ends an
 * instance (close, replacement, a crash loop) it kills the group itself and
 * then the reaper, which it reaps like any child. So no process of the pool
 * is left for PID 1 to reap except when the worker itself died, and a PID 1
 * that never reaps (Node as a container's PID 1, Docker without `--init`)
 * does not collect a zombie per ended instance. It has a session of its own,
 * so a terminal's Ctrl-C that reaches the worker's group does not end it
 * first. Servers in a PID namespace need none: the namespace takes
 * everything with it.
 */
export class GroupReaper {
  readonly #child: ChildProcess;
  /** Resolves once the reaper has exited and been reaped (or could not start). */
  readonly exited: Promise<void>;

  private constructor(child: ChildProcess) {
    this.#child = child;
    this.exited = new Promise((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) resolve();
      child.once('exit', () => resolve());
      child.once('error', () => resolve());
    });
  }

  /**
   * Starts the reaper of `pgid`'s group. A reaper that cannot start is no
   * reason to fail a server that did: its failure is ignored, and the server
   * keeps its parent-death signal.
   */
  static start(sh: string, pgid: number): GroupReaper {
    const child = spawn(sh, ['-c', REAPER_SCRIPT, REAPER_NAME, String(pgid)], { detached: true, stdio: ['pipe', 'ignore', 'ignore'], env: {} });
    child.on('error', () => undefined);
    child.stdin?.on('error', () => undefined);
    // Neither may keep a worker that is done from exiting; its exit then ends the pipe, and the reaper does its job.
    child.unref();
    (child.stdin as { unref?: () => void } | null)?.unref?.();
    return new GroupReaper(child);
  }

  /** The reaper's pid (for tests and `ps`); undefined when it could not be spawned. */
  get pid(): number | undefined {
    return this.#child.pid;
  }

  /** Ends the reaper without its kill: the worker has killed the group itself. Idempotent. */
  stop(): void {
    if (this.#child.exitCode === null && this.#child.signalCode === null) this.#child.kill('SIGKILL');
  }

  /**
   * Stops the reaper and waits until it has exited and been reaped, for at
   * most `ms`: a worker that stops right after would otherwise leave it to
   * PID 1 (a zombie, under an init that never reaps), and a reaper is never
   * worth a hung shutdown.
   */
  async stopAndReap(ms: number): Promise<void> {
    this.stop();
    await Promise.race([this.exited, delay(ms, undefined, { ref: false })]);
  }
}
