import type { ToolExecutor } from '@forge-fleet/shared';

/**
 * Marks an executor whose calls keep a session per caller on this worker: an
 * MCP server with `session: perCaller`, whose instance holds what the caller
 * built up. When several workers serve the server, a caller's call that
 * another worker took is sent on to the worker holding the caller's session
 * (see CallRunner.run and CallerSessions in packages/store), so a caller's
 * calls all reach its one instance.
 */
export const CALLER_SESSION: unique symbol = Symbol.for('forge.callerSession');

/** The sessions one server keeps on this worker. */
export interface CallerSessionSource {
  /** The server's name: sessions are held per server and caller, whichever of its tools a call names. */
  readonly server: string;
  /** Whether `caller` has a session here now. */
  holds(caller: string): boolean;
  /** The callers with a session here now. */
  callers(): Iterable<string>;
  /** Gives up `caller`'s session here: another worker holds it (its instance stops once its calls end). */
  giveUp(caller: string): void;
}

/** An executor whose calls keep a session per caller. */
export interface CallerSessionExecutor extends ToolExecutor {
  readonly [CALLER_SESSION]: CallerSessionSource | undefined;
}

/** The sessions `executor`'s calls keep per caller, or `undefined` for an executor that keeps none. */
export function callerSessionOf(executor: ToolExecutor | undefined): CallerSessionSource | undefined {
  return (executor as Partial<CallerSessionExecutor> | undefined)?.[CALLER_SESSION];
}
