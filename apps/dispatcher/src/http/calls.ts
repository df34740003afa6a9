import { PassThrough, Readable } from 'node:stream';
import {
  BadRequestError,
  type CallView,
  isFinalStatus,
  isFleetError,
  lineReader,
  MAX_WAIT_MS,
  PayloadTooLargeError,
  SubmitBatchRequest,
  SubmitCallRequest,
  ToolCallId,
  UnavailableError,
  UnsupportedMediaTypeError,
} from '@forge-fleet/shared';
import { carrierOf } from '@forge-fleet/telemetry';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { type Authenticator, type Caller, requireRole } from '../auth/authenticator.js';
import type { CallService } from '../pipeline/call-service.js';
import { asFleetError, errorBody, parseRequest } from './errors.js';
import { hangUpOf } from './hang-up.js';
import { jsonBodies, withArgumentsAsSent } from './json-body.js';
import { MEDIA_TYPE_REMEDY, mediaTypeOf } from './media-type.js';

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
 * One call as sent, on any entrance (single, batch item, stream line), its
 * arguments as JSON.parse made them (see withArgumentsAsSent), so the call
 * service's argument check sees every key sent.
 * @throws BadRequestError naming `what` and each problem.
 */
function callRequestOf(raw: unknown, what: string): SubmitCallRequest {
  return withArgumentsAsSent(parseRequest(SubmitCallRequest, raw, what), raw);
}

/** The JSON body of a route that takes one; a call stream sent to it is refused with where to send it. */
function jsonBodyOf(request: FastifyRequest): unknown {
  if (request.body instanceof Readable) {
    throw new UnsupportedMediaTypeError('application/x-ndjson', 'send a call (or a batch) as application/json here, or send a call stream to POST /v1/calls/stream');
  }
  return request.body;
}

const statusOf = (view: CallView): number => (isFinalStatus(view.status) ? 200 : 202);

/** How long a call stream takes new calls; later lines are answered UNAVAILABLE, so clients open a new one (and show their token again). */
export const STREAM_MAX_AGE_MS = 60_000;

/** What the call routes need beyond the service. */
export interface CallRoutesOptions {
  /** Whether the dispatcher is shutting down (streams then take no new calls and end once answered). */
  readonly closing?: (() => boolean) | undefined;
  /** Longest line of a call stream, in characters: the body limit of one call (bytes; a line's characters are at most as many). */
  readonly maxLineChars: number;
}

/** `/v1/calls`: submit (one, a batch, or a stream), read (and await), cancel. */
export function callRoutes(calls: CallService, auth: Authenticator, options: CallRoutesOptions) {
  const closing = options.closing ?? (() => false);
  return (app: FastifyInstance): void => {
    // Prototype keys are answered per call (callRequestOf), so a batch's other calls run.
    jsonBodies(app, 'keep');
    // A call stream's body is read line by line by its route, as it arrives.
    app.addContentTypeParser('application/x-ndjson', (_request, payload, done) => done(null, payload));
    /** Ends the streams that are answered and takes no more calls on any: run as the server begins to close. */
    const streams = new Set<() => void>();
    app.addHook('preClose', (done) => {
      for (const end of [...streams]) end();
      done();
    });

    app.post('/v1/calls', async (request, reply) => {
      const caller = await callerOf(request, auth);
      const { wait } = parseRequest(WaitQuery, request.query, 'query');
      const body = callRequestOf(jsonBodyOf(request), 'body');
      const view = await calls.submit(body, caller, wait, hangUpOf(request.raw.socket), carrierOf(request.headers));
      return reply.status(statusOf(view)).send(view);
    });

    // Several calls in one request; each is answered on its own NDJSON line as soon as it ends (or its wait runs out),
    // so a slow call never holds back a fast one. Clients batch the calls they make at the same moment.
    app.post('/v1/calls/batch', async (request, reply) => {
      const caller = await callerOf(request, auth);
      const { wait } = parseRequest(WaitQuery, request.query, 'query');
      const { calls: items } = parseRequest(SubmitBatchRequest, jsonBodyOf(request), 'body');
      const signal = hangUpOf(request.raw.socket);
      const lines = new PassThrough();
      // A client that hangs up mid-answer destroys the stream; the calls go on and their results stay readable by id.
      lines.on('error', () => undefined);
      let open = items.length;
      const write = (index: number, body: object): void => {
        if (!lines.destroyed) lines.write(`${JSON.stringify({ index, ...body })}\n`);
        if (--open === 0 && !lines.destroyed) lines.end();
      };
      items.forEach((raw, index) => {
        let submitted: Promise<CallView>;
        try {
          submitted = calls.submit(callRequestOf(raw, `calls[${index}]`), caller, wait, signal);
        } catch (error) {
          submitted = Promise.reject(asFleetError(error));
        }
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

    // One long request for many calls: each call is a line of the request body (a SubmitCallRequest with its id),
    // each answer a line of the response (`{ id, ...view }` or `{ id, error }`) as soon as its call ends or its
    // wait runs out. For an agent whose calls end a few at a time this takes the HTTP work of a request out of
    // every call. The answer ends once the body has ended and every call is answered; a dispatcher shutting down
    // answers what it holds, takes no new calls (UNAVAILABLE: the client sends them elsewhere) and ends it.
    app.post('/v1/calls/stream', async (request, reply) => {
      const caller = await callerOf(request, auth);
      const { wait } = parseRequest(WaitQuery, request.query, 'query');
      const input = request.body;
      if (!(input instanceof Readable)) throw new UnsupportedMediaTypeError(mediaTypeOf(request.headers['content-type']), MEDIA_TYPE_REMEDY.callStream);
      const signal = hangUpOf(request.raw.socket);
      const opened = Date.now();
      const out = new PassThrough();
      out.on('error', () => undefined);
      let open = 0;
      let lineNo = 0;
      let inputEnded = false;
      const answer = (body: object): void => {
        // A client that sends calls but does not read their answers is not read either until it catches up.
        if (!out.destroyed && !out.writableEnded && !out.write(`${JSON.stringify(body)}\n`)) input.pause();
      };
      out.on('drain', () => input.resume());
      const end = (): void => {
        if (open > 0 || !(inputEnded || closing()) || out.writableEnded) return;
        streams.delete(end);
        out.end();
        // Ended by a shutdown while the client still sends: nothing more will be read.
        if (!inputEnded) reply.raw.once('finish', () => request.raw.destroy());
      };
      streams.add(end);
      const onLine = (line: string): void => {
        const at = ++lineNo;
        let value: unknown;
        try {
          value = JSON.parse(line);
        } catch {
          answer({ line: at, ...errorBody(new BadRequestError(`line ${at} of the call stream is not JSON`)) });
          return;
        }
        const raw = (value as { id?: unknown } | null)?.id;
        const tag = typeof raw === 'string' ? { id: raw } : { line: at };
        let item: SubmitCallRequest;
        try {
          item = callRequestOf(value, `line ${at}`);
        } catch (error) {
          return answer({ ...tag, ...errorBody(asFleetError(error)) });
        }
        if (item.id === undefined) return answer({ ...tag, ...errorBody(new BadRequestError(`line ${at}: every call on a stream carries its id, to match its answer`)) });
        if (closing()) return answer({ ...tag, ...errorBody(new UnavailableError('shutting down', { what: 'this dispatcher takes no new calls' })) });
        if (Date.now() - opened > STREAM_MAX_AGE_MS) return answer({ ...tag, ...errorBody(new UnavailableError(`streams take calls for ${STREAM_MAX_AGE_MS / 1000} s`, { what: 'this call stream takes no new calls' })) });
        open++;
        calls.submit(item, caller, wait, signal).then(
          (view) => answer(view),
          (error: unknown) => {
            if (!isFleetError(error)) request.log.error({ err: error }, 'streamed call failed');
            answer({ ...tag, ...errorBody(asFleetError(error)) });
          },
        ).finally(() => {
          open--;
          end();
        });
      };
      const read = lineReader(onLine, {
        maxLineChars: options.maxLineChars,
        onOverflow: () => {
          const at = ++lineNo;
          // As a single call over the body limit is answered; the line is matched by its number (its id went unread).
          answer({ line: at, ...errorBody(new PayloadTooLargeError(options.maxLineChars)) });
        },
      });
      input.on('data', read);
      const inputDone = (): void => {
        inputEnded = true;
        end();
      };
      input.on('end', inputDone);
      input.on('error', inputDone);
      // An empty first line (readers skip empty lines): Node holds the headers back until the first byte, and a
      // client must see its stream answered before any call ends (else it takes the stream for unsupported).
      out.write('\n');
      return reply.status(200).header('content-type', 'application/x-ndjson').send(out);
    });

    app.get<{ Params: { id: string } }>('/v1/calls/:id', async (request, reply) => {
      const caller = await callerOf(request, auth);
      const id = parseRequest(ToolCallId, request.params.id, 'call id');
      const { wait } = parseRequest(WaitQuery, request.query, 'query');
      const view = await calls.get(id, wait, caller, hangUpOf(request.raw.socket));
      return reply.status(statusOf(view)).send(view);
    });

    app.post<{ Params: { id: string } }>('/v1/calls/:id/cancel', async (request, reply) => {
      const caller = await callerOf(request, auth);
      const id = parseRequest(ToolCallId, request.params.id, 'call id');
      return reply.status(200).send(await calls.cancel(id, caller));
    });
  };
}
