import { type CliContext, ExitCode } from '../context.js';
import type { FleetApi } from '../endpoint.js';
import { jsonText, toolsTable } from '../output.js';

/** `forge tools`: the live tools the token's scope lists (`GET /v1/tools`). */
export async function runTools(api: Pick<FleetApi, 'tools'>, json: boolean, ctx: CliContext): Promise<ExitCode> {
  const tools = await api.tools();
  ctx.stdout.write(`${json ? jsonText({ tools }) : toolsTable(tools)}\n`);
  return ExitCode.OK;
}
