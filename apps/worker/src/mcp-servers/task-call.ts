import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { RequestOptions } from '@modelcontextprotocol/sdk/shared/protocol.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';

/**
 * A tool a server lists with `execution.taskSupport: "required"` (MCP
 * 2025-11-25 Tasks) refuses a plain `tools/call` (-32601). Such a tool is
 * called as a task: the `tools/call` carries `task`, the server answers at once
 * with the task it created, and `tasks/result` then waits for the outcome,
 * which is the tool's `CallToolResult`. The fleet's call is the same call to
 * its caller either way: a cancel or a timeout also sends `tasks/cancel`, so
 * the server stops the work rather than only the wait; the task's status
 * messages become the call's progress.
 */

/** The task part of a `CreateTaskResult` or a `tasks/get` answer, as far as the fleet reads it. */
const TaskState = z.looseObject({
  taskId: z.string().min(1),
  status: z.string(),
  statusMessage: z.string().optional(),
  pollInterval: z.number().finite().nonnegative().optional(),
});
type TaskState = z.infer<typeof TaskState>;

const isObject = (value: unknown): boolean => typeof value === 'object' && value !== null && !Array.isArray(value);

/** A `tools/call` result taken as the server sent it (an object); resultOf in mcp-tool-executor.ts checks it. */
export const ANY_RESULT = z.custom<CallToolResult>(isObject, 'a tools/call result must be an object');

/** The answer to a task-augmented `tools/call` or a `tasks/get`: the task, or (a server that ran it at once) the result itself. */
const CreatedOrResult = z.custom<Record<string, unknown>>(isObject, 'a tools/call answer must be an object');

/** The statuses after which a task changes no more (MCP 2025-11-25). */
const TERMINAL = new Set(['completed', 'failed', 'cancelled']);

/** How long a task is asked to be kept past the call's own timeout, so its result is still there to fetch. */
const TTL_MARGIN_MS = 60_000;

/** Bounds on how often a task's status is read for its messages, whatever `pollInterval` the server asks for. */
const POLL_MIN_MS = 250;
const POLL_MAX_MS = 5_000;

/** How long the `tasks/cancel` of a call that ended is given. */
const CANCEL_TIMEOUT_MS = 5_000;

/** What {@link callAsTask} is told of the call. */
export interface TaskCallOptions {
  /** The whole call, task creation and result, ends with the SDK's request timeout past this. */
  readonly timeoutMs: number;
  readonly signal?: AbortSignal | undefined;
  /** Receives each new status message of the task while it runs; reading the status stops without it. */
  readonly onStatus?: ((message: string) => void) | undefined;
}

/**
 * Calls `params.name` as a task on `client` and resolves with the tool's
 * result. Rejects as `client.request` does (a JSON-RPC error, the request
 * timeout, an abort), after sending `tasks/cancel` for a task that was
 * created and has not ended.
 */
export async function callAsTask(client: Client, params: { name: string; arguments: Record<string, unknown>; _meta?: Record<string, unknown> }, options: TaskCallOptions): Promise<CallToolResult> {
  const deadline = Date.now() + options.timeoutMs;
  const requestOptions = (): RequestOptions => ({ timeout: Math.max(1, deadline - Date.now()), ...(options.signal === undefined ? {} : { signal: options.signal }) });
  const answer = await client.request({ method: 'tools/call', params: { ...params, task: { ttl: options.timeoutMs + TTL_MARGIN_MS } } }, CreatedOrResult, requestOptions());
  const created = TaskState.safeParse(answer.task);
  // A server may run a task-augmented request without a task (one that dropped task support since it listed): its answer is the result.
  if (!created.success) return answer as CallToolResult;
  const task = created.data;
  let ended = TERMINAL.has(task.status);
  const watch = options.onStatus === undefined || ended ? undefined : new StatusWatch(client, task, options.onStatus);
  try {
    const result = await client.request({ method: 'tasks/result', params: { taskId: task.taskId } }, ANY_RESULT, requestOptions());
    ended = true;
    return result;
  } catch (err) {
    if (!ended) {
      // The wait was cancelled or timed out: the work itself is stopped too. The caller has its answer already.
      client.request({ method: 'tasks/cancel', params: { taskId: task.taskId } }, CreatedOrResult, { timeout: CANCEL_TIMEOUT_MS }).catch(() => {});
    }
    throw err;
  } finally {
    watch?.stop();
  }
}

/**
 * Reads a running task's status every `pollInterval` (bounded) and passes on
 * each status message that differs from the last. A status that cannot be
 * read is skipped: the result's wait decides how the call ends, not this.
 */
class StatusWatch {
  readonly #taskId: string;
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;
  #last: string | undefined;

  constructor(
    private readonly client: Client,
    task: TaskState,
    private readonly onStatus: (message: string) => void,
  ) {
    this.#taskId = task.taskId;
    this.#seen(task);
    // The first read comes soon: a task's first message is usually set just after it was created.
    this.#schedule(POLL_MIN_MS);
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
  }

  #schedule(pollInterval: number | undefined): void {
    if (this.#stopped) return;
    const wait = Math.min(POLL_MAX_MS, Math.max(POLL_MIN_MS, pollInterval ?? 1000));
    this.#timer = setTimeout(() => void this.#poll(), wait);
    this.#timer.unref();
  }

  async #poll(): Promise<void> {
    let pollInterval: number | undefined;
    try {
      const state = TaskState.safeParse(await this.client.request({ method: 'tasks/get', params: { taskId: this.#taskId } }, CreatedOrResult, { timeout: POLL_MAX_MS }));
      if (state.success) {
        if (this.#stopped) return;
        this.#seen(state.data);
        if (TERMINAL.has(state.data.status)) return;
        pollInterval = state.data.pollInterval;
      }
    } catch {
      // Skipped; tried again at the next interval.
    }
    this.#schedule(pollInterval);
  }

  #seen(task: TaskState): void {
    const message = task.statusMessage;
    if (message === undefined || message === '' || message === this.#last) return;
    this.#last = message;
    this.onStatus(message);
  }
}
