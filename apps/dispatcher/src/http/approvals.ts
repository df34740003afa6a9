import { ApprovalDecisionRequest, ToolCallId } from '@forge-fleet/shared';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { ApprovalService } from '../approvals/approval-service.js';
import type { Authenticator } from '../auth/authenticator.js';
import { parseRequest } from './errors.js';
import { jsonBodies, withArgumentsAsSent } from './json-body.js';

/** `GET /v1/approvals` query (also described by openapi.ts). */
export const ApprovalListQuery = z.strictObject({ limit: z.coerce.number().int().min(1).max(1000).default(100) });

/** `/v1/approvals`: calls waiting for a person, and their decisions (approver or admin tokens). */
export function approvalRoutes(approvals: ApprovalService, auth: Authenticator) {
  return (app: FastifyInstance): void => {
    // A `modify`'s arguments are checked as a submission's are, prototype keys included, with the same answer
    // (ApprovalService.decide); anywhere else in the body the strict schema refuses such a key as unknown.
    jsonBodies(app, 'keep');

    app.get('/v1/approvals', async (request) => {
      const caller = await auth.caller(request.headers);
      const { limit } = parseRequest(ApprovalListQuery, request.query, 'query');
      return approvals.list(caller, limit);
    });

    app.post<{ Params: { id: string } }>('/v1/approvals/:id', async (request, reply) => {
      const caller = await auth.caller(request.headers);
      const id = parseRequest(ToolCallId, request.params.id, 'call id');
      const decision = withArgumentsAsSent(parseRequest(ApprovalDecisionRequest, request.body, 'body'), request.body);
      const view = await approvals.decide(id, decision, caller);
      return reply.status(view.status === 'queued' ? 202 : 200).send(view);
    });
  };
}
