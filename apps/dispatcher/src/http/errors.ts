import { isRedisAway } from '@forge-fleet/store';
import { BadRequestError, type FleetError, InternalError, isFleetError, PayloadTooLargeError, RouteNotFoundError, toWireError, UnavailableError, UnsupportedMediaTypeError } from '@forge-fleet/shared';
import type { FastifyError, FastifyInstance, FastifyRequest } from 'fastify';
import type { DecisionAudit } from '../audit/decisions.js';
import { bearerChallenge } from '../auth/authenticator.js';
import { MEDIA_TYPE_REMEDY, mediaTypeOf } from './media-type.js';
import { type output, ZodError, type ZodType } from 'zod';

/** The body of every error answer: `{ error: { code, message, …details } }`. */
export function errorBody(error: FleetError): { error: Record<string, unknown> } {
  const wire = toWireError(error);
  return { error: { ...wire.details, code: wire.code, message: wire.message, retryable: wire.retryable } };
}

/** A zod failure's issues as one line a client can act on: `field: problem; …` (`fallback` names the whole value). */
export function zodIssues(error: ZodError, fallback: string): string {
  return error.issues.map((i) => `${i.path.join('.') || fallback}: ${i.message}`).join('; ');
}

/** A zod failure of one part of a request (`body`, `query`…) as BAD_REQUEST: `what: field: problem; …`. */
export function badRequest(what: string, error: ZodError): BadRequestError {
  // A problem of the whole part is said once: `body: Unrecognized key…`, not `body: body: …`.
  return new BadRequestError(`${what}: ${error.issues.map((i) => (i.path.length === 0 ? i.message : `${i.path.join('.')}: ${i.message}`)).join('; ')}`);
}

/**
 * Checks one part of a request against its schema. A query parameter given
 * more than once (`?wait=5000&wait=10`) arrives as a list, which no query
 * schema takes: it is refused as such, not as the NaN it would coerce to.
 * @throws BadRequestError naming each problem.
 */
export function parseRequest<S extends ZodType>(schema: S, value: unknown, what: string): output<S> {
  if (what === 'query' && typeof value === 'object' && value !== null) {
    const repeated = Object.entries(value).filter(([, v]) => Array.isArray(v));
    if (repeated.length > 0) throw new BadRequestError(`query: ${repeated.map(([k, v]) => `${k} is given ${(v as unknown[]).length} times`).join('; ')}; give it once`);
  }
  const r = schema.safeParse(value);
  if (!r.success) throw badRequest(what, r.error);
  return r.data;
}

/** Anything a request's handling threw, as the FleetError it answers with: Redis away is UNAVAILABLE (retry), the unexpected INTERNAL. */
export function asFleetError(error: unknown): FleetError {
  if (isFleetError(error)) return error;
  if (error instanceof Error && isRedisAway(error)) return new UnavailableError(error.message, { cause: error });
  return new InternalError(error instanceof Error ? error.message : String(error), { cause: error });
}

/**
 * Whether fastify refused a request's body for its media type: no parser of
 * the route reads it (text/plain included: the app removes fastify's own), or
 * the header does not parse. Its message names no type; the request's header does.
 */
export function isUnreadMediaType(error: unknown): boolean {
  if (typeof error !== 'object' || error === null || isFleetError(error)) return false;
  const { code, statusCode } = error as Partial<FastifyError>;
  return code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE' || statusCode === 415;
}

/** Turns what fastify itself raises (bad JSON, body too large…) into our codes. */
function fromFastify(error: FastifyError, bodyLimit: number, request: FastifyRequest): FleetError {
  if (isRedisAway(error)) return new UnavailableError(error.message, { cause: error });
  if (error.code === 'FST_ERR_CTP_BODY_TOO_LARGE' || error.statusCode === 413) return new PayloadTooLargeError(bodyLimit);
  if (isUnreadMediaType(error)) {
    const remedy = request.routeOptions.url === '/v1/calls/stream' ? MEDIA_TYPE_REMEDY.callStream : MEDIA_TYPE_REMEDY.json;
    return new UnsupportedMediaTypeError(mediaTypeOf(request.headers['content-type']), remedy);
  }
  if (error instanceof ZodError) return new BadRequestError(zodIssues(error, 'body'));
  if (error.statusCode !== undefined && error.statusCode >= 400 && error.statusCode < 500) return new BadRequestError(error.message);
  return new InternalError(error.message, { cause: error });
}

/**
 * One error handler for the whole API: FleetErrors answer with their own HTTP
 * status and code; anything else is logged and answered as INTERNAL.
 */
export function registerErrorHandling(app: FastifyInstance, bodyLimit: number, audit?: DecisionAudit): void {
  app.setErrorHandler((error: FastifyError, request, reply) => {
    // The client hung up while a streamed (batch) answer was being written: nothing to answer, nothing broken.
    if (error.code === 'ERR_STREAM_PREMATURE_CLOSE' || reply.raw.destroyed) {
      request.log.info('client went away before its answer was complete');
      return;
    }
    const fleetError = isFleetError(error) ? error : fromFastify(error, bodyLimit, request);
    if (fleetError.httpStatus >= 500 && fleetError.code === 'INTERNAL') request.log.error({ err: error }, 'request failed');
    else request.log.info({ code: fleetError.code }, 'request refused');
    // Refusals before any call existed; the call service audits the refusals of calls.
    if (fleetError.code === 'UNAUTHENTICATED' || fleetError.code === 'FORBIDDEN') {
      const role = fleetError.details['role'];
      audit?.rejectedRequest(fleetError.code, `${request.method} ${request.routeOptions.url ?? request.url}`, fleetError.message, typeof role === 'string' ? role : undefined);
    }
    if (fleetError.code === 'UNAUTHENTICATED') {
      const reason = fleetError.details['reason'];
      void reply.header('www-authenticate', bearerChallenge((request.headers.authorization ?? '') !== '', typeof reason === 'string' ? reason : fleetError.message));
    }
    // Refused before its body was read (at the door, or a body in a type no route reads): the rest of the body is
    // not waited for. Node would otherwise read it to the end to keep the connection, at whatever pace it comes.
    if (!request.raw.complete) void reply.header('connection', 'close');
    void reply.status(fleetError.httpStatus).send(errorBody(fleetError));
  });
  app.setNotFoundHandler((request, reply) => {
    const error = new RouteNotFoundError(request.method, request.url);
    void reply.status(error.httpStatus).send(errorBody(error));
  });
}
