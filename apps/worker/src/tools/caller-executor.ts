import type { ToolExecutor } from '@forge-fleet/shared';

/**
 * Marks an executor that must know whose call it runs: the sandbox's, whose
 * processes each serve one caller (docs/sandbox.md). The caller travels
 * beside the call rather than in `ToolContext`, so no handler is ever shown
 * another agent's identity, and every other executor is untouched.
 */
export const BIND_CALLER: unique symbol = Symbol.for('forge.bindCaller');

/** An executor that runs calls as a given caller. */
export interface CallerBoundExecutor extends ToolExecutor {
  /** This executor, running calls as `caller` (the envelope's signed token subject; `undefined`: anonymous). */
  [BIND_CALLER](caller: string | undefined): ToolExecutor;
}

/** `executor` as it runs calls of `caller`: bound when it asks for one, itself otherwise. */
export function executorForCaller(executor: ToolExecutor, caller: string | undefined): ToolExecutor {
  const bind = (executor as Partial<CallerBoundExecutor>)[BIND_CALLER];
  return bind === undefined ? executor : bind.call(executor, caller);
}
