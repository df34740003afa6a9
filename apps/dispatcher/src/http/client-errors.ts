import type { Socket } from 'node:net';
import { BadRequestError, type FleetError, HeadersTooLargeError, RequestTimeoutError, RouteNotFoundError, UriTooLongError } from '@forge-fleet/shared';
import type { FastifyBaseLogger, FastifyReply, FastifyRequest } from 'fastify';
import { errorBody } from './errors.js';
import { answerOnSocket } from './raw-answer.js';

/** Node's limit on the size of a request's headers in all (`--max-http-header-size`). */
const MAX_HEADER_BYTES = 16_384;

/** fastify's limit on one path parameter (`maxParamLength`). */
export const MAX_PARAM_CHARS = 100;

/** What Node's HTTP parser refused a connection's request for, as the FleetError it is answered with. */
function fromClientError(error: Error & { code?: string }, headersTimeoutMs: number): FleetError {
  switch (error.code) {
    case 'HPE_HEADER_OVERFLOW':
      return new HeadersTooLargeError(MAX_HEADER_BYTES);
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return new RequestTimeoutError('headers', headersTimeoutMs);
    case 'HPE_UNEXPECTED_CONTENT_LENGTH':
      return new BadRequestError('the request has both Content-Length and Transfer-Encoding headers, which HTTP/1.1 forbids (a request-smuggling pattern); send exactly one of them');
    default:
      return new BadRequestError(`the request is not well-formed HTTP/1.1 (${error.code ?? 'parse error'}: ${error.message}); check the request line and headers`);
  }
}

/**
 * Answers what Node refuses before any request exists (headers too large,
 * conflicting framing, a headers timeout, garbage) with the documented error
 * body rather than fastify's own, then closes the connection.
 */
export function clientErrorHandler(log: FastifyBaseLogger, headersTimeoutMs: number) {
  return (error: Error & { code?: string }, socket: Socket): void => {
    // A reset connection, or one already closed: nobody to answer.
    if (error.code === 'ECONNRESET' || socket.destroyed) return;
    const fleetError = fromClientError(error, headersTimeoutMs);
    log.debug({ err: error, code: fleetError.code }, 'malformed request refused');
    answerOnSocket(socket, fleetError);
  };
}

/** fastify's own routing refusals (a path segment too long, a malformed URL), with the documented error body. */
export function frameworkErrorHandler(error: Error & { code?: string }, request: FastifyRequest, reply: FastifyReply): void {
  const fleetError =
    error.code === 'FST_ERR_MAX_PARAM_LENGTH'
      ? new UriTooLongError(MAX_PARAM_CHARS)
      : error.code === 'FST_ERR_BAD_URL'
        ? new BadRequestError('the URL path is not valid (a malformed %-escape?); percent-encode the path correctly')
        : new RouteNotFoundError(request.method, request.url);
  void reply.status(fleetError.httpStatus).send(errorBody(fleetError));
}
