import { type CliContext, ExitCode } from '../context.js';
import type { FleetApi } from '../endpoint.js';
import { jsonText, queuesTable } from '../output.js';

/** `forge queues`: job counts and live workers per tier and pool queue (`GET /v1/queues`). */
export async function runQueues(api: Pick<FleetApi, 'queues'>, json: boolean, ctx: CliContext): Promise<ExitCode> {
  const stats = await api.queues();
  ctx.stdout.write(`${json ? jsonText(stats) : queuesTable(stats.queues)}\n`);
  return ExitCode.OK;
}
