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

/** An executor that reserves a slot before its call starts. */
export interface SlotReservingExecutor extends ToolExecutor {
  readonly [RESERVE_SLOT]: ReserveSlot;
}

/** How to reserve a slot for `executor`'s calls, or `undefined` for an executor that runs them at once. */
export function slotReserverOf(executor: ToolExecutor): ReserveSlot | undefined {
  const reserve = (executor as Partial<SlotReservingExecutor>)[RESERVE_SLOT];
  return reserve === undefined ? undefined : reserve.bind(executor);
}
