/**
 * The code that runs inside a sandbox process. It is bundled together with the
 * tools module (see bundle.ts) and must stay free of anything the sandbox
 * forbids: no file access beyond the bundle, no child processes, no network.
 */
import { Socket } from 'node:net';
import { isFleetError, ProgressThrottle, progressOf, toWireError, type Tier, type ToolExecutor, type TrustLevel } from '@forge-fleet/shared';
import { lineReader, Outbox } from './framing.js';
import { type RunRequest, type RuntimeConfig, SANDBOX_PROGRESS_INTERVAL_MS, type SandboxRequest } from './protocol.js';

/** The protocol channel the worker opened as the fourth stdio entry. */
const CHANNEL_FD = 3;

function reasonOf(error: unknown): string {
  if (error instanceof Error) return error.message || error.name;
  return typeof error === 'string' ? error : (JSON.stringify(error) ?? String(error));
}

/** V8's own words when an allocation hits the data rlimit rather than the heap limit. */
const OFF_HEAP_OOM = /Array buffer allocation failed|Out of memory|Cannot allocate Wasm memory|Unable to grow instance memory/;

function executorsOf(tools: unknown): Map<string, ToolExecutor> {
  const executors = new Map<string, ToolExecutor>();
  if (!Array.isArray(tools)) return executors;
  for (const tool of tools as unknown[]) {
    const executor = (tool as { executor?: ToolExecutor } | null)?.executor;
    if (executor !== undefined && typeof executor.name === 'string' && typeof executor.execute === 'function') executors.set(executor.name, executor);
  }
  return executors;
}

/** Serves calls for the tools of one module until the worker closes the channel. */
export function serveSandbox(tools: unknown): void {
  const config = JSON.parse(process.argv[2] ?? '{}') as Partial<RuntimeConfig>;
  const outputBytes = config.outputBytes ?? 1 << 20;
  const executors = executorsOf(tools);
  const channel = new Socket({ fd: CHANNEL_FD, readable: true, writable: true });
  const running = new Map<string, AbortController>();
  // Replies written in the same turn leave in one write.
  const outbox = new Outbox((text) => channel.write(text));
  const send = (message: object): void => outbox.send(JSON.stringify(message));

  const run = async (request: RunRequest): Promise<void> => {
    const controller = new AbortController();
    running.set(request.runId, controller);
    // Coalesced here too, so a handler reporting in a tight loop does not flood the channel.
    // Made on the first report: most handlers never report.
    let throttle: ProgressThrottle | undefined;
    const report = (checked: ReturnType<typeof progressOf>): void => {
      throttle ??= new ProgressThrottle(SANDBOX_PROGRESS_INTERVAL_MS, ({ progress, total, message }) => {
        send({ type: 'progress', runId: request.runId, progress, ...(total === undefined ? {} : { total }), ...(message === undefined ? {} : { message }) });
      });
      throttle.push(checked);
    };
    try {
      const executor = executors.get(request.tool);
      if (executor === undefined) throw new Error(`the sandbox bundle has no tool '${request.tool}'`);
      const call = { id: request.callId, name: request.tool, arguments: request.arguments };
      const result = await executor.execute(call, {
        call,
        signal: controller.signal,
        tier: request.tier as Tier,
        attempt: request.attempt,
        env: Object.freeze({ ...request.env }),
        trust: request.trust as TrustLevel,
        progress: (update) => {
          const checked = progressOf(update);
          if (running.get(request.runId) === controller && !controller.signal.aborted) report(checked);
        },
      });
      throttle?.close();
      const line = JSON.stringify({ type: 'result', runId: request.runId, result });
      if (Buffer.byteLength(line) > outputBytes) {
        send({ type: 'limit', runId: request.runId, limit: 'output', detail: `the result is ${Buffer.byteLength(line)} bytes, the limit is ${outputBytes}` });
      } else {
        outbox.send(line);
      }
    } catch (error) {
      if (isFleetError(error)) send({ type: 'fleet-error', runId: request.runId, error: toWireError(error) });
      else if (error instanceof RangeError && OFF_HEAP_OOM.test(error.message)) send({ type: 'limit', runId: request.runId, limit: 'memory', detail: error.message });
      else send({ type: 'thrown', runId: request.runId, reason: reasonOf(error) });
    } finally {
      throttle?.close();
      running.delete(request.runId);
    }
  };

  channel.on('data', lineReader((line) => {
    const request = JSON.parse(line) as SandboxRequest;
    if (request.type === 'run') void run(request);
    else if (request.type === 'ping') send({ type: 'pong', seq: request.seq });
    else running.get(request.runId)?.abort(new Error(request.reason));
  }));
  // Without its worker a sandbox has nothing to do; never outlive it.
  channel.on('end', () => process.exit(0));
  channel.on('error', () => process.exit(0));
  send({ type: 'ready', tools: [...executors.keys()] });
}
