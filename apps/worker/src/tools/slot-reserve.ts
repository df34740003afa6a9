import type { ToolExecutor } from '@forge-fleet/shared';

/**
 * Marks an executor whose calls can wait inside the worker for a place to
 * run: an MCP server's pool, whose instances take so many calls at once.
 * A call taken from the queue counts as started once its start step lands,
 * and a started call that its worker loses ends WORKER_LOST unless its tool
 * is retryable. So the wait must come before the start step: a call that
 * waited for a slot and never got one is still `queued`, and goes to another
 * worker (handed back at a shutdown, or found by BullMQ after a kill -9)
 * instead of being lost with this one.
 */
export const RESERVE_SLOT: unique symbol = Symbol.for('forge.reserveSlot');

/** A slot held for one call: run the call with `executor`, or give the slot back with `release`. */
export interface ReservedRun {
  /** Runs the call on the reserved slot (once; a second call waits for a slot of its own). */
  readonly executor: ToolExecutor;
  /** Gives the slot back if the call did not take it; a no-op after the call ran. */
  release(): void;
}

/**
 * Waits for a slot. `onCancellable` is handed the way to stop the wait: the
 * promise then rejects (a no-op once the slot was given).
 */
export type ReserveSlot = (caller: string | undefined, onCancellable: (cancel: (reason: unknown) => void) => void) => Promise<ReservedRun>;

/**
 * Marks the question "would a call of this caller wait for a slot that only
 * a running call's end (or a session's reaping) frees?": every slot taken and
 * no more instances to start. When another live worker serves the pack, a
 * worker hands such a call back to the queue rather than hold it, so that a
 * worker with a free slot takes it (see CallRunner.run).
 */
export const SLOTS_FULL: unique symbol = Symbol.for('forge.slotsFull');

/** An executor that reserves a slot before its call starts. */
export interface SlotReservingExecutor extends ToolExecutor {
  readonly [RESERVE_SLOT]: ReserveSlot;
  /** `waiting`: asked for a call that waits for a slot itself, which must not count as a reason to stay. */
  [SLOTS_FULL](caller: string | undefined, waiting?: boolean): boolean;
}

/** How to reserve a slot for an executor's calls, and whether one would wait. */
export interface SlotReserver {
  readonly reserve: ReserveSlot;
  /** `waiting`: asked for a call that waits for a slot itself, which must not count as a reason to stay. */
  readonly full: (caller: string | undefined, waiting?: boolean) => boolean;
}

/** How to reserve a slot for `executor`'s calls, or `undefined` for an executor that runs them at once. */
export function slotReserverOf(executor: ToolExecutor): SlotReserver | undefined {
  const reserving = executor as Partial<SlotReservingExecutor>;
  const reserve = reserving[RESERVE_SLOT];
  if (reserve === undefined) return undefined;
  return { reserve: reserve.bind(executor), full: (caller, waiting) => reserving[SLOTS_FULL]?.(caller, waiting) === true };
}
