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
 * Runs a fleet command: starts it, stops it gracefully on SIGTERM or SIGINT
 * and exits 0, or exits 1 with one readable line (error code first) when
 * start-up fails.
 */
export function runMain(name: string, start: () => Promise<RunningProcess>): void {
  start().then(
    (running) => {
      const shutdown = (signal: string): void => {
        running.log.info({ signal }, 'shutting down');
        if (running.forceExitAfterMs !== undefined) {
          setTimeout(() => {
            running.log.error({ graceMs: running.forceExitAfterMs }, 'grace period over: exiting with work still open');
            process.exit(1);
          }, running.forceExitAfterMs).unref();
        }
        running.stop().then(
          () => process.exit(0),
          (err: unknown) => {
            running.log.error({ err }, 'shutdown failed');
            process.exit(1);
          },
        );
      };
      process.once('SIGTERM', () => shutdown('SIGTERM'));
      process.once('SIGINT', () => shutdown('SIGINT'));
    },
    (error: unknown) => {
      const line = isFleetError(error) ? `${error.code}: ${error.message}` : error instanceof Error ? (error.stack ?? error.message) : String(error);
      process.stderr.write(`${name}: ${line}\n`);
      process.exit(1);
    },
  );
}
