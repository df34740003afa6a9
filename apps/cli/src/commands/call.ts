import { type CallView, InternalError, isFinalStatus, WaitTimeoutError } from '@forge-fleet/shared';
import { type CliContext, ExitCode } from '../context.js';
import type { FleetApi } from '../endpoint.js';
import { jsonText, printable, resultText } from '../output.js';
import { ProgressLine } from '../progress.js';

/**
 * How long each wait round of `forge call --wait` holds its request: the
 * dispatcher answers at once when the call ends, so this only sets how often
 * the status line refreshes.
 */
export const WAIT_ROUND_MS = 1000;

/** One `forge call`, as its command line asked for it. */
export interface CallRequest {
  readonly tool: string;
  readonly args: Record<string, unknown>;
  /** Chosen by the caller (idempotent submission); the dispatcher makes one otherwise. */
  readonly id?: string | undefined;
  /** Wait for the end and print the result (else print the id and status). */
  readonly wait: boolean;
  /** Stop waiting after this long (the call goes on). Unset: wait until the call ends. */
  readonly timeoutMs?: number | undefined;
  /** Print the call's view as JSON instead of the result. */
  readonly json: boolean;
}

/**
 * Submits a call; with `wait`, waits in rounds of {@link WAIT_ROUND_MS},
 * keeping a status line on stderr, and prints how it ended.
 * @throws FleetError when the dispatcher refuses the call; WaitTimeoutError after `timeoutMs`.
 */
export async function runCall(api: Pick<FleetApi, 'submit' | 'get'>, request: CallRequest, ctx: CliContext): Promise<ExitCode> {
  const now = ctx.now ?? Date.now;
  const started = now();
  let view = await api.submit(request.tool, request.args, request.id === undefined ? {} : { id: request.id });
  if (!request.wait && !isFinalStatus(view.status)) {
    ctx.stdout.write(`${request.json ? jsonText(view) : `${view.id} ${view.status}${view.reason === undefined ? '' : ` (${printable(view.reason)})`}`}\n`);
    return ExitCode.OK;
  }
  const line = new ProgressLine(ctx.stderr);
  const deadline = request.timeoutMs === undefined ? Infinity : started + request.timeoutMs;
  try {
    while (!isFinalStatus(view.status)) {
      line.show(view, now() - started);
      const left = deadline - now();
      if (left <= 0) throw new WaitTimeoutError(view.id, request.timeoutMs ?? 0, view.status);
      view = await api.get(view.id, { waitMs: Math.min(WAIT_ROUND_MS, left) });
      if (isFinalStatus(view.status) && view.progress === undefined) view = await withLastReport(api, view);
    }
    line.show(view, now() - started);
  } finally {
    line.end();
  }
  return printEnded(view, request.json, ctx);
}

/**
 * The ended call with the tool's last progress report, read from its record:
 * a wait that ends with the call answers from the worker's reply, which
 * carries the result only, and a tool that reports just before it returns
 * (as most do: "100%, done") does so between two rounds. A read that fails
 * leaves the view as it is: the result is what counts.
 */
async function withLastReport(api: Pick<FleetApi, 'get'>, view: CallView): Promise<CallView> {
  try {
    const { progress } = await api.get(view.id);
    return progress === undefined ? view : { ...view, progress };
  } catch {
    return view;
  }
}

/** Prints an ended call: its result (exit 0), or its error code and message on stderr (exit 1). */
function printEnded(view: CallView, json: boolean, ctx: CliContext): ExitCode {
  if (view.result === undefined) throw new InternalError(`call '${view.id}' ended (${view.status}) without a result`);
  if (json) ctx.stdout.write(`${jsonText(view)}\n`);
  if (view.status === 'completed') {
    if (!json) ctx.stdout.write(`${resultText(view.result)}\n`);
    return ExitCode.OK;
  }
  const { error, content } = view.result;
  ctx.stderr.write(`forge: ${error?.code ?? view.status.toUpperCase()}: ${printable(error?.message ?? content)}\n`);
  return ExitCode.FAILED;
}
