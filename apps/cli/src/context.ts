import type { Endpoint, FleetApi } from './endpoint.js';
import type { CliEnv } from './env.js';
import type { StatusStream } from './progress.js';

/** How `forge` ends: 0 done (a call that completed), 1 failed (refused, failed, cancelled, unreachable), 2 a wrong command line. */
export const ExitCode = { OK: 0, FAILED: 1, USAGE: 2 } as const;
export type ExitCode = (typeof ExitCode)[keyof typeof ExitCode];

/** What a command may use of the world: kept apart from the process so tests run commands directly. */
export interface CliContext {
  readonly env: Readonly<CliEnv>;
  /** Results: tables, JSON, a call's output. */
  readonly stdout: { write(text: string): unknown };
  /** Errors and the progress line of `forge call --wait`. */
  readonly stderr: StatusStream;
  /** The clock of relative times and elapsed times. @defaultValue Date.now */
  readonly now?: () => number;
  /** Opens the fleet client. @defaultValue openFleetClient */
  readonly openFleet?: (endpoint: Endpoint) => FleetApi;
}
