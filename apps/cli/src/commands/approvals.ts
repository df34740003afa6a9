import type { ApprovalDecisionRequest } from '@forge-fleet/shared';
import { type CliContext, ExitCode } from '../context.js';
import type { FleetApi } from '../endpoint.js';
import { approvalsTable, jsonText } from '../output.js';

/** `forge approvals`: calls waiting for a person, oldest deadline first (`GET /v1/approvals`). */
export async function runApprovals(api: Pick<FleetApi, 'approvals'>, json: boolean, ctx: CliContext): Promise<ExitCode> {
  const approvals = await api.approvals();
  ctx.stdout.write(`${json ? jsonText({ approvals }) : approvalsTable(approvals, (ctx.now ?? Date.now)())}\n`);
  return ExitCode.OK;
}

const DONE = { approve: 'approved', deny: 'denied', modify: 'modified' } as const;

/** `forge approvals approve|deny|modify ID`: one person's decision on a waiting call (`POST /v1/approvals/:id`). */
export async function runDecide(api: Pick<FleetApi, 'decide'>, id: string, decision: ApprovalDecisionRequest, json: boolean, ctx: CliContext): Promise<ExitCode> {
  const view = await api.decide(id, decision);
  ctx.stdout.write(`${json ? jsonText(view) : `${DONE[decision.decision]} ${view.id}: ${view.status}`}\n`);
  return ExitCode.OK;
}
