import { setMaxListeners } from 'node:events';
import { PassThrough } from 'node:stream';
import {
  type CallView,
  isFinalStatus,
  isFleetError,
  MAX_WAIT_MS,
  SubmitBatchRequest,
  SubmitCallRequest,
  ToolCallId,
} from '@forge-fleet/shared';
import { carrierOf } from '@forge-fleet/telemetry';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { type Authenticator, type Caller, requireRole } from '../auth/authenticator.js';
import type { CallService } from '../pipeline/call-service.js';
import { asFleetError, badRequest, errorBody, parseRequest } from './errors.js';

/** `?wait=<ms>`: how long a request holds out for the call to end (also described by openapi.ts). */
export const WaitQuery = z.object({
  wait: z.coerce.number().int().min(0).max(MAX_WAIT_MS, `wait is at most ${MAX_WAIT_MS} ms`).default(0),
});

/** The caller of a call route: authenticated, and in a role that may call tools. */
async function callerOf(request: FastifyRequest, auth: Authenticator): Promise<Caller> {
  const caller = await auth.caller(request.headers);
  requireRole(caller, 'call tools', ['agent', 'admin']);
  return caller;
}

/**
 * Aborts when the client goes away before its answer is written, so a long
 * wait does not outlive its request. (Aborting after every normal answer
 * would cost an AbortError per request for nothing.)
 */
function clientGone(request: FastifyRequest, reply: FastifyReply): AbortSignal {
  const controller = new AbortController();
  reply.raw.once('close', () => {
    if (!reply.raw.writableFinished) controller.abort();
  });
  return controller.signal;
}

const statusOf = (view: CallView): number => (isFinalStatus(view.status) ? 200 : 202);

/** `/v1/calls`: submit, read (and await), cancel. */
export function callRoutes(calls: CallService, auth: Authenticator) {
  return (app: FastifyInstance): void => {
    app.post('/v1/calls', async (request, reply) => {
      const caller = await callerOf(request, auth);
      const { wait } = parseRequest(WaitQuery, request.query, 'query');
      const body = parseRequest(SubmitCallRequest, request.body, 'body');
      const view = await calls.submit(body, caller, wait, clientGone(request, reply), carrierOf(request.headers));
      return reply.status(statusOf(view)).send(view);
    });

    // Several calls in one request; each is answered on its own NDJSON line as soon as it ends (or its wait runs out),
    // so a slow call never holds back a fast one. Clients batch the calls they make at the same moment.
    app.post('/v1/calls/batch', async (request, reply) => {
      const caller = await callerOf(request, auth);
      const { wait } = parseRequest(WaitQuery, request.query, 'query');
      const { calls: items } = parseRequest(SubmitBatchRequest, request.body, 'body');
      const signal = clientGone(request, reply);
      // Every call of the batch waits on this one signal; that is expected, not a leak.
      setMaxListeners(items.length + 10, signal);
      const lines = new PassThrough();
      // A client that hangs up mid-answer destroys the stream; the calls go on and their results stay readable by id.
      lines.on('error', () => undefined);
      let open = items.length;
      const write = (index: number, body: object): void => {
        if (!lines.destroyed) lines.write(`${JSON.stringify({ index, ...body })}\n`);
        if (--open === 0 && !lines.destroyed) lines.end();
      };
      items.forEach((raw, index) => {
        const item = SubmitCallRequest.safeParse(raw);
        const submitted = item.success ? calls.submit(item.data, caller, wait, signal) : Promise.reject(badRequest(`calls[${index}]`, item.error));
        submitted.then(
          (view) => write(index, view),
          (error: unknown) => {
            if (!isFleetError(error)) request.log.error({ err: error }, 'batch call failed');
            write(index, errorBody(asFleetError(error)));
          },
        );
      });
      return reply.status(200).header('content-type', 'application/x-ndjson').send(lines);
    });

    app.get<{ Params: { id: string } }>('/v1/calls/:id', async (request, reply) => {
      const caller = await callerOf(request, auth);
      const id = parseRequest(ToolCallId, request.params.id, 'call id');
      const { wait } = parseRequest(WaitQuery, request.query, 'query');
      const view = await calls.get(id, wait, caller, clientGone(request, reply));
      return reply.status(statusOf(view)).send(view);
    });

    app.post<{ Params: { id: string } }>('/v1/calls/:id/cancel', async (request, reply) => {
      const caller = await callerOf(request, auth);
      const id = parseRequest(ToolCallId, request.params.id, 'call id');
      return reply.status(200).send(await calls.cancel(id, caller));
    });
  };
}
