import { isFleetError } from '../errors/fleet-error.js';

/** The few logger methods a process's lifecycle needs (pino's Logger has them). */
export interface LifecycleLogger {
  info(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

/** What a started process hands back. */
export interface RunningProcess {
  readonly log: LifecycleLogger;
  /** Stops gracefully: stop taking work, finish or hand back what is active, close connections. */
  stop(): Promise<void>;
  /** After SIGTERM, exit with 1 if `stop` has not finished by then. @defaultValue no limit */
  readonly forceExitAfterMs?: number;
}

/**
 * A signal this soon after the first is the same request, not a second one: a
 * terminal's Ctrl-C (or `kill -- -PGID`) reaches every process of the group at
 * once, and a supervisor in that group (`npm start`) then sends its own
 * SIGTERM to each child. Were that "a second signal", one Ctrl-C would cut off
 * every running call instead of giving it the grace period.
 */
export const SAME_REQUEST_MS = 1000;

/**
 * Runs a fleet command: starts it, stops it gracefully on SIGTERM or SIGINT
 * and exits 0, or exits 1 with one readable line (error code first) when
 * start-up fails.
 *
 * The signal handlers are in place before `start` runs: a process prints that
 * it is ready from inside `start`, and a SIGTERM sent on seeing that line must
 * stop it gracefully, not kill it (the default action). A signal that comes
 * while it starts is kept, and acted on once start-up ends. A second signal,
 * while it starts or stops, ends it at once: a stop that hangs (its Redis
 * went first) must never outlive the one who asked for it twice. Only one
 * that comes {@link SAME_REQUEST_MS} or more after the first counts as second.
 */
export function runMain(name: string, start: (stopRequested: AbortSignal) => Promise<RunningProcess>): void {
  let running: RunningProcess | undefined;
  // Aborted by a signal that comes while it starts: a start that waits (a worker's MCP servers) can stop waiting.
  const stopRequested = new AbortController();
  let pending: string | undefined;
  let stopping = false;
  let firstAt: number | undefined;
  const onSignal = (signal: string): void => {
    const now = Date.now();
    if (firstAt !== undefined && now - firstAt < SAME_REQUEST_MS) {
      running?.log.info({ signal }, 'signal right after the first: the same request, still stopping gracefully');
      return;
    }
    firstAt ??= now;
    shutdown(signal);
  };
  const shutdown = (signal: string): void => {
    if (running === undefined) {
      // A second signal while it still starts: someone wants it gone now (a start-up that hangs must stay stoppable).
      if (pending !== undefined) process.exit(1);
      pending = signal;
      stopRequested.abort(new Error(`${signal} while starting`));
      return;
    }
    // A second signal while it stops (a person's second Ctrl-C, a supervisor's TERM after the group's INT): now.
    if (stopping) {
      running.log.error({ signal }, 'second signal while stopping: exiting now');
      process.exit(1);
    }
    stopping = true;
    const r = running;
    r.log.info({ signal }, 'shutting down');
    if (r.forceExitAfterMs !== undefined) {
      setTimeout(() => {
        r.log.error({ graceMs: r.forceExitAfterMs }, 'grace period over: exiting with work still open');
        process.exit(1);
      }, r.forceExitAfterMs).unref();
    }
    r.stop().then(
      () => process.exit(0),
      (err: unknown) => {
        r.log.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => onSignal('SIGTERM'));
  process.on('SIGINT', () => onSignal('SIGINT'));
  start(stopRequested.signal).then(
    (started) => {
      running = started;
      if (pending !== undefined) shutdown(pending);
    },
    (error: unknown) => {
      const line = isFleetError(error) ? `${error.code}: ${error.message}` : error instanceof Error ? (error.stack ?? error.message) : String(error);
      process.stderr.write(`${name}: ${line}\n`);
      process.exit(1);
    },
  );
}

/** A logger that can make children and tell which levels it writes (pino's Logger can). */
export interface ChildCapableLogger<L> {
  child(bindings: Record<string, unknown>): L;
  isLevelEnabled(level: string): boolean;
}

const LEVELS = new Set(['trace', 'debug', 'info', 'warn', 'error', 'fatal']);
const noop = (): void => {};

/**
 * A per-call logger whose child is made only when a line is actually written:
 * at `warn` a busy process logs almost nothing per call, and a child per call
 * would be allocations for nothing.
 */
export function lazyChild<L extends object>(parent: ChildCapableLogger<L>, bindings: Record<string, unknown>): L {
  let child: L | undefined;
  return new Proxy({} as L, {
    get: (_target, key) => {
      if (typeof key === 'string' && LEVELS.has(key) && !parent.isLevelEnabled(key)) return noop;
      child ??= parent.child(bindings);
      const value = (child as Record<PropertyKey, unknown>)[key];
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(child) : value;
    },
  });
}
