import type { IncomingMessage } from 'node:http';
import { RequestTimeoutError, RouteNotFoundError } from '@forge-fleet/shared';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Authenticator } from '../auth/authenticator.js';
import type { ConnectionGate } from './connection-gate.js';
import { type DoorOptions, streamBodyTimeoutMs } from './door-options.js';
import { HostCheck } from './host-check.js';
import { answerOnSocket } from './raw-answer.js';

/** Routes whose body may stay open for the stream's whole life (see {@link streamBodyTimeoutMs}). */
const STREAM_ROUTES: ReadonlySet<string> = new Set(['/v1/calls/stream']);

/**
 * Whether a route takes a token. Everything under `/v1`, and `POST /mcp`; not
 * `/healthz`, `/readyz`, `/metrics` (probes and scrapers), `/openapi.json`, the
 * console's files (`/ui`), nor `GET`/`DELETE /mcp` (answered 405 to anyone).
 */
export function needsToken(method: string, route: string): boolean {
  return route.startsWith('/v1/') || (route === '/mcp' && method === 'POST');
}

/** Whether a request announces a body (which a route would then wait for). */
function hasBody(raw: IncomingMessage): boolean {
  const length = raw.headers['content-length'];
  return raw.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

export interface DoorDeps {
  readonly auth: Authenticator;
  readonly options: Readonly<DoorOptions>;
  /** Holds the connection caps; absent for an app that never listens (inject-only tests). */
  readonly gate?: ConnectionGate | undefined;
  /** How long a call stream takes calls (its body may stay open that long, and its last call's wait on top). */
  readonly streamMaxAgeMs: number;
}

/**
 * The dispatcher's door: one `onRequest` hook, before any body is read, for
 * every route. A request for a route that takes a token is checked for its Host
 * and Origin and authenticated here — a request without a valid token is
 * answered 401 (and its connection closed) before a byte of its body is
 * waited for. Routes then read the verified caller (Authenticator.caller of the
 * same headers) and check its role. A body, once authenticated, must arrive
 * within the body timeout.
 */
export function registerDoors(app: FastifyInstance, deps: DoorDeps): void {
  const hosts = new HostCheck(deps.options);
  const streamTimeoutMs = streamBodyTimeoutMs(deps.options, deps.streamMaxAgeMs);
  app.addHook('onRequest', async (request, reply) => {
    const socket = request.raw.socket;
    if (deps.gate !== undefined && !deps.gate.request(socket, (listener) => reply.raw.once('close', listener))) {
      // The gate closed this connection already (over capacity); Node still parsed a request on it.
      void reply.hijack();
      return;
    }
    const route = request.routeOptions.url;
    // No route: answered 404 now, rather than after reading a body no route wants.
    if (route === undefined || request.is404) {
      if (hasBody(request.raw)) throw new RouteNotFoundError(request.method, request.url);
      return;
    }
    if (!needsToken(request.method, route)) return;
    hosts.check(request.headers.host, request.headers.origin);
    await deps.auth.caller(request.headers);
    deps.gate?.authenticated(socket);
    // A small body came in the same read as its headers (most do): it needs no deadline, nor a timer to clear.
    if (hasBody(request.raw) && !request.raw.complete) bodyDeadline(request, reply, STREAM_ROUTES.has(route) ? streamTimeoutMs : deps.options.bodyTimeoutMs, deps.options.bodyTimeoutMs);
  });
}

/** Closes the connection of a request whose body has not arrived `ms` after its headers: 408 if nothing was answered yet. */
function bodyDeadline(request: FastifyRequest, reply: FastifyReply, ms: number, configuredMs: number): void {
  const raw = request.raw;
  const timer = setTimeout(() => {
    if (raw.complete) return;
    request.log.info({ timeoutMs: ms }, 'request body too slow; connection closed');
    if (!reply.raw.headersSent) answerOnSocket(raw.socket, new RequestTimeoutError('body', configuredMs));
    else raw.socket.destroy();
  }, ms);
  timer.unref();
  const clear = (): void => clearTimeout(timer);
  raw.once('end', clear);
  raw.once('close', clear);
}
