import { CancelledError, ExecutionFailedError, ExecutionTimeoutError, OutputValidationError } from '../errors/errors.js';
import { type FleetError, isFleetError } from '../errors/fleet-error.js';
import { toWireError } from '../errors/wire.js';
import { compileSchema } from '../schema/compile.js';
import type { TrustLevel } from '../scope/trust.js';
import { ToolResult, type ToolCall } from '../tools/call.js';
import type { ToolDefinition } from '../tools/definition.js';
import { FnToolExecutor, type ToolContext, type ToolExecutor } from '../tools/executor.js';
import { type CallProgress, progressOf } from '../tools/progress.js';
import { resultTooDeep, tooDeepAt } from '../tools/result-depth.js';

/** Builds the error result a caller receives when a call ends in failure. */
export function errorResult(call: Pick<ToolCall, 'id' | 'name'>, error: FleetError): ToolResult {
  return { toolCallId: call.id, name: call.name, content: error.message, isError: true, error: toWireError(error) };
}

/** How one execution runs. */
export interface RunOptions {
  /** Cancels the call: the handler's signal fires and the result is `CANCELLED`. */
  readonly signal?: AbortSignal | undefined;
  /** @defaultValue 1 */
  readonly attempt?: number | undefined;
  /** @defaultValue `{}` */
  readonly env?: Readonly<Record<string, string>> | undefined;
  /** @defaultValue `'trusted'` */
  readonly trust?: TrustLevel | undefined;
  /**
   * Receives, before the handler starts, a function that cancels this run as
   * aborting `signal` would. For a caller that owns the cancellation (a
   * worker pool): cheaper than an AbortController and a listener per call.
   */
  readonly onCancellable?: ((cancel: (reason: unknown) => void) => void) | undefined;
  /** Hears the handler's progress reports, checked and stamped, until the call ends. */
  readonly onProgress?: ((progress: CallProgress) => void) | undefined;
}

function reasonOf(error: unknown): string {
  if (error instanceof Error) return error.message || error.name;
  return typeof error === 'string' ? error : JSON.stringify(error) ?? String(error);
}

/**
 * Runs an approved call on its executor and always returns a result: a handler
 * that throws, times out, is cancelled or returns the wrong shape yields an
 * error result with a typed code. It never rejects, so one bad tool cannot
 * take down the process or the other calls it is running.
 */
export async function runExecutor(executor: ToolExecutor, definition: ToolDefinition, call: ToolCall, options: RunOptions = {}): Promise<ToolResult> {
  if (options.signal?.aborted) return errorResult(call, new CancelledError(call.name, reasonOf(options.signal.reason)));

  const controller = new AbortController();
  let settle: (failure: FleetError) => void = () => {};
  const interrupted = new Promise<FleetError>((resolve) => (settle = resolve));
  const cancel = (reason: unknown): void => {
    if (controller.signal.aborted) return;
    const failure = new CancelledError(call.name, reasonOf(reason));
    controller.abort(failure);
    settle(failure);
  };
  const onAbort = (): void => cancel(options.signal?.reason);
  options.signal?.addEventListener('abort', onAbort, { once: true });
  options.onCancellable?.(cancel);
  const timer =
    definition.timeoutMs === undefined
      ? undefined
      : setTimeout(() => {
          const failure = new ExecutionTimeoutError(call.name, definition.timeoutMs ?? 0);
          controller.abort(failure);
          settle(failure);
        }, definition.timeoutMs);

  let ended = false;
  const { onProgress } = options;
  const ctx: ToolContext = {
    call,
    signal: controller.signal,
    tier: definition.tier,
    attempt: options.attempt ?? 1,
    env: options.env ?? {},
    trust: options.trust ?? 'trusted',
    progress: (update) => {
      // Checked even when nobody listens, so a bad report fails the same way everywhere.
      const progress = progressOf(update);
      // A handler that outlives its call (ignored its signal) reports to no one.
      if (!ended && !controller.signal.aborted) onProgress?.(progress);
    },
  };
  const execution = (async () => executor.execute(call, ctx))();
  // A handler that ignores its signal may still settle after we answered; its outcome no longer matters.
  execution.catch(() => undefined);
  try {
    const outcome = await Promise.race([execution.then((result) => ({ result }), (error: unknown) => ({ error })), interrupted.then((failure) => ({ failure }))]);
    if ('failure' in outcome) return errorResult(call, outcome.failure);
    if ('error' in outcome) {
      const error = outcome.error;
      return errorResult(call, isFleetError(error) ? error : new ExecutionFailedError(call.name, reasonOf(error), { cause: error }));
    }
    return checkResult(definition, call, outcome.result, executor instanceof FnToolExecutor);
  } finally {
    ended = true;
    if (timer !== undefined) clearTimeout(timer);
    options.signal?.removeEventListener('abort', onAbort);
  }
}

function checkResult(definition: ToolDefinition, call: ToolCall, raw: unknown, trusted: boolean): ToolResult {
  let result: ToolResult;
  if (trusted) {
    // Built by resultFromOutput for this very call: nothing to check, and this is the hot path.
    result = raw as ToolResult;
  } else {
    const parsed = ToolResult.safeParse(raw);
    if (!parsed.success) {
      return errorResult(call, new ExecutionFailedError(call.name, `the executor returned something that is not a ToolResult (${parsed.error.issues[0]?.message ?? 'invalid'})`));
    }
    // The result answers this call, whatever ids a custom executor put in it.
    result = { ...parsed.data, toolCallId: call.id, name: call.name };
  }
  // Every hop after this one writes the result as JSON: one nested past what JSON.stringify can write ends here,
  // as a failed call, rather than as a RangeError wherever it is written next. Plain text cannot nest.
  if (result.structuredContent !== undefined || result.blocks !== undefined) {
    const at = tooDeepAt(result);
    if (at !== undefined) return errorResult(call, resultTooDeep(call.name, at));
  }
  if (definition.outputSchema === undefined || result.isError) return result;
  if (result.structuredContent === undefined) {
    return errorResult(call, new OutputValidationError(call.name, '', 'the tool declares an outputSchema but returned no JSON object'));
  }
  const compiled = compileSchema(definition.outputSchema);
  const issues = compiled.ok ? compiled.validate(result.structuredContent) : [{ path: '', reason: compiled.problem.reason, keyword: '$schema' }];
  const [first] = issues;
  return first === undefined ? result : errorResult(call, new OutputValidationError(call.name, first.path, first.reason));
}
