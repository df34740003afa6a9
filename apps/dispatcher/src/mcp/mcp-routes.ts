import { randomUUID } from 'node:crypto';
import { BadRequestError, type CallView, errorResult, type FleetError, isFinalStatus, isFleetError, MAX_WAIT_MS, ToolCallId } from '@forge-fleet/shared';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import {
  CallToolRequestSchema,
  type CallToolRequest,
  type CallToolResult,
  CancelledNotificationSchema,
  ErrorCode,
  ListToolsRequestSchema,
  type ServerNotification,
  type ServerRequest,
} from '@modelcontextprotocol/sdk/types.js';
import { carrierOf } from '@forge-fleet/telemetry';
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import type { ServerResponse } from 'node:http';
import type { DecisionAudit } from '../audit/decisions.js';
import { type Authenticator, type Caller, requireRole } from '../auth/authenticator.js';
import type { CatalogView } from '../catalog/catalog-view.js';
import { asFleetError, isUnreadMediaType } from '../http/errors.js';
import { mediaTypeOf } from '../http/media-type.js';
import { dispatcherVersion } from '../http/openapi.js';
import type { CallService } from '../pipeline/call-service.js';
import { type ArgumentLimits, checkArguments } from '../limits/arguments.js';
import { prototypeKeyIn, prototypeKeyPath } from '../http/json-body.js';
import { refusalOf, toCallToolResult } from './call-results.js';
import type { McpCancelBus } from './cancel-bus.js';
import { hangUpOf } from '../http/hang-up.js';
import { InFlightCalls } from './in-flight.js';
import { type DirectCall, directCallOf, internalErrorOf, writeDirectAnswer } from './direct-call.js';
import { checkBody, mediaTypeRefusal, parseRefusal } from './json-rpc-body.js';
import { type ProgressNotice, ProgressNotices } from './progress-notices.js';
import { DEFAULT_PAGE_SIZE, listPage, META } from './tool-listing.js';

/** What `/mcp` needs (the app's deps have it all). */
export interface McpDeps {
  readonly calls: CallService;
  readonly catalog: CatalogView;
  readonly auth: Authenticator;
  readonly audit: DecisionAudit;
  /** Carries cancellations this process cannot match to the dispatcher holding the request (several dispatchers). */
  readonly cancelBus?: McpCancelBus | undefined;
}

export interface McpOptions {
  /** Tools per `tools/list` page. @defaultValue {@link DEFAULT_PAGE_SIZE} */
  readonly pageSize?: number;
}

type Extra = RequestHandlerExtra<ServerRequest, ServerNotification>;
/** What a `tools/call` uses of the SDK's request context: the direct path (direct-call.ts) gives just this. */
type CallExtra = Pick<Extra, 'signal' | 'requestId' | 'sendNotification'>;

/**
 * With a progress token, the longest a client goes without a notification while its call runs: short
 * enough that a client with `resetTimeoutOnProgress` and the SDK's default 60 s request timeout keeps waiting.
 */
const PROGRESS_INTERVAL_MS = 15_000;

/** What one MCP request is served with: who asks, and the process-wide state requests share. */
interface Context {
  readonly deps: McpDeps;
  readonly caller: Caller;
  /** The key of this client's requests in {@link InFlightCalls}. */
  readonly client: string;
  readonly inFlight: InFlightCalls;
  readonly cancelBus: McpCancelBus | undefined;
  readonly pageSize: number;
  readonly log: FastifyBaseLogger;
  readonly version: string;
}

/**
 * Runs one `tools/call` through the whole pipeline (scope → catalog → schema →
 * approval → tier queue) and waits, in rounds of {@link MAX_WAIT_MS} (or
 * {@link PROGRESS_INTERVAL_MS} when the client wants progress), until the call
 * ends. The MCP request ending first — a `notifications/cancelled`, or the
 * client hanging up — cancels the fleet call: an MCP client has no other way to
 * come back for the result.
 */
async function callTool(cx: Context, request: CallToolRequest, extra: CallExtra, closeRequest: () => Promise<void>): Promise<CallToolResult> {
  const { calls } = cx.deps;
  const { name, arguments: args = {}, _meta: meta } = request.params;
  const chosenId = meta?.[META.callId];
  const parsedId = chosenId === undefined ? undefined : ToolCallId.safeParse(chosenId);
  const id = parsedId?.success === true ? parsedId.data : randomUUID();
  const call = { id, name };
  if (parsedId?.success === false) {
    return toCallToolResult(errorResult(call, new BadRequestError(`_meta["${META.callId}"] ${parsedId.error.issues[0]?.message ?? 'is invalid'}`)));
  }
  try {
    requireRole(cx.caller, 'call tools', ['agent', 'admin']);
  } catch (error) {
    if (isFleetError(error)) return refusalOf(error, call);
    throw error;
  }

  // Fires on an explicit cancellation (InFlightCalls) and when the SDK aborts the request (its connection closed).
  const cancelled = new AbortController();
  const onAbort = (): void => cancelled.abort(extra.signal.reason);
  extra.signal.addEventListener('abort', onAbort, { once: true });
  if (extra.signal.aborted) onAbort();
  const unregister = cx.inFlight.add(cx.client, extra.requestId, cancelled);

  // With a progress token the client hears the statuses this request observes and the tool's own reports
  // (ctx.progress, pushed by the worker as it sends them), on one increasing scale (ProgressNotices).
  // A view read from the record carries the tool's latest report too: a report whose push is still on its way
  // when the record already says the call ended reaches the client that way, before the final status.
  const progressToken = meta?.progressToken;
  const notices = new ProgressNotices();
  const notify = (notice: ProgressNotice | undefined): void => {
    if (notice === undefined || progressToken === undefined || cancelled.signal.aborted) return;
    extra.sendNotification({ method: 'notifications/progress', params: { progressToken, ...notice } }).catch((err: unknown) => cx.log.debug({ err, callId: id }, 'progress notification not sent'));
  };
  const observe = (view: CallView): void => {
    if (view.progress !== undefined) notify(notices.report(view.progress));
    notify(notices.status(view.status));
  };
  const unsubscribe = progressToken === undefined ? () => {} : calls.onProgress(id, (p) => notify(notices.report(p)));

  try {
    let view: CallView;
    try {
      // With a progress token the submission answers at once, so the client hears `queued` before the call ends.
      // `_meta.traceparent` (and `tracestate`), as MCP clients that trace send it, joins the call to the client's trace.
      view = await calls.submit({ id, name, arguments: args }, cx.caller, progressToken === undefined ? MAX_WAIT_MS : 0, cancelled.signal, carrierOf(meta));
      while (!isFinalStatus(view.status) && !cancelled.signal.aborted) {
        observe(view);
        view = await calls.get(id, progressToken === undefined ? MAX_WAIT_MS : PROGRESS_INTERVAL_MS, cx.caller, cancelled.signal);
      }
    } catch (error) {
      // Redis away answers UNAVAILABLE (an isError result the client may retry), as on /v1.
      return refusalOf(asFleetError(error), call);
    }
    if (cancelled.signal.aborted && !isFinalStatus(view.status)) {
      let after: CallView;
      try {
        after = await calls.cancel(id, cx.caller);
        cx.log.info({ callId: id, tool: name, status: after.status }, 'MCP request cancelled; fleet call cancelled');
      } finally {
        // The client stopped waiting for this request: end its stream with no answer (the SDK sends none for an aborted request).
        await closeRequest();
      }
      return after.result === undefined ? { content: [{ type: 'text', text: `call ${id} was cancelled` }], isError: true } : toCallToolResult(after.result, after);
    }
    observe(view);
    if (view.result === undefined) return { content: [{ type: 'text', text: `call ${id} ended ${view.status} without a result` }], isError: true };
    return toCallToolResult(view.result, view);
  } finally {
    unsubscribe();
    unregister();
    extra.signal.removeEventListener('abort', onAbort);
  }
}

/**
 * Serves a plain `tools/call` without the SDK (see direct-call.ts), with what
 * the SDK's path guarantees: the client hanging up cancels the fleet call, a
 * `notifications/cancelled` (InFlightCalls) does too and ends the stream with
 * no answer, and a handler's throw is the SDK's JSON-RPC error.
 */
async function answerDirectly(cx: Context, { id, request }: DirectCall, res: ServerResponse): Promise<void> {
  // The connection's hang-up: callTool lets go of it once the call is answered.
  const hangUp = hangUpOf(res.socket);
  let answered = true;
  const noNotifications = (): Promise<void> => Promise.resolve();
  try {
    const result = await callTool(cx, request, { signal: hangUp, requestId: id, sendNotification: noNotifications }, () => {
      answered = false;
      return Promise.resolve();
    });
    writeDirectAnswer(res, answered ? { jsonrpc: '2.0', id, result } : undefined);
  } catch (error) {
    cx.log.error({ err: error }, 'MCP tools/call failed');
    writeDirectAnswer(res, internalErrorOf(id, error));
  }
}

/** An MCP server for one HTTP request (stateless mode): it lists and calls tools as `cx.caller`. */
function serverFor(cx: Context): Server {
  const server = new Server(
    { name: 'forge-fleet', version: cx.version },
    {
      capabilities: { tools: { listChanged: false } },
      instructions: 'Forge Fleet runs these tools on isolated worker tiers. A result with isError: true is an error you can act on (its text says what failed).',
    },
  );
  server.onerror = (err) => cx.log.warn({ err }, 'MCP protocol error');
  server.setRequestHandler(ListToolsRequestSchema, (request) => {
    cx.deps.audit.listed(cx.caller, 'POST /mcp tools/list');
    return listPage(cx.caller.scope.scope.filter(cx.deps.catalog.list()), request.params?.cursor, cx.pageSize);
  });
  server.setRequestHandler(CallToolRequestSchema, (request, extra) => callTool(cx, request, extra, () => server.close()));
  // Replaces the SDK's own handler, which only knows the requests of this one-request server.
  server.setNotificationHandler(CancelledNotificationSchema, (notification) => {
    const { requestId, reason } = notification.params;
    if (requestId === undefined) return;
    const outcome = cx.inFlight.cancel(cx.client, requestId, reason);
    // Not held here: another dispatcher may hold it (each POST can reach any of them).
    if (outcome === 'none') cx.cancelBus?.publish({ client: cx.client, requestId, ...(reason === undefined ? {} : { reason }) });
    if (outcome === 'ambiguous') cx.log.warn({ requestId }, 'MCP cancellation names a request id several clients of one token have in flight, and no session id: none is cancelled');
  });
  return server;
}

/** A `/mcp` body as parsed: its JSON, or why it is none. */
class McpBody {
  constructor(
    readonly json: unknown,
    readonly problem?: 'not-json' | 'forbidden-key' | 'forbidden-argument',
  ) {}
}

/**
 * What a parsed body holds that may reach Object.prototype. In a `tools/call`'s
 * arguments it is the call's problem, not the message's: it is answered as the
 * /v1 routes answer it (BAD_REQUEST from the argument check, here as a tool
 * error result), so the same arguments get the same answer on every entrance.
 * Anywhere else the message itself is refused (-32600).
 */
function prototypeProblem(text: string, value: unknown): 'forbidden-key' | 'forbidden-argument' | undefined {
  const found = prototypeKeyIn(text, value);
  if (found === undefined) return undefined;
  const message = value as { method?: unknown; params?: { arguments?: unknown } };
  const inArguments = found.path.startsWith('params.arguments.') && message.method === 'tools/call' && prototypeKeyPath({ ...message, params: { ...message.params, arguments: {} } }) === undefined;
  return inArguments ? 'forbidden-argument' : 'forbidden-key';
}

/** The answer to a `tools/call` whose arguments hold such a key: the argument check's BAD_REQUEST, as a tool error result. */
function forbiddenArgumentAnswer(
  message: { id?: unknown; params?: { name?: unknown; arguments?: unknown; _meta?: Record<string, unknown> } },
  limits: ArgumentLimits,
): { jsonrpc: '2.0'; id: unknown; result: CallToolResult } {
  const name = typeof message.params?.name === 'string' ? message.params.name : '';
  let error: FleetError = new BadRequestError('the arguments hold a refused key');
  try {
    // The /v1 routes' walk, to the same depth: nesting past it, met before the key, is their first problem too.
    checkArguments(message.params?.arguments as Record<string, unknown>, { maxBytes: Number.MAX_SAFE_INTEGER, maxDepth: limits.maxDepth });
  } catch (refused) {
    if (isFleetError(refused)) error = refused;
  }
  const id = message.params?._meta?.[META.callId];
  return { jsonrpc: '2.0', id: message.id ?? null, result: refusalOf(error, { id: typeof id === 'string' ? id : randomUUID(), name }) };
}

/** Whether a POST's body is an `initialize` request (alone: a batch may not carry one). */
function isInitialize(json: unknown): boolean {
  return typeof json === 'object' && json !== null && !Array.isArray(json) && (json as { method?: unknown }).method === 'initialize';
}

/** A JSON-RPC error body for requests the stateless transport does not serve (-32000: the server-error range, as the SDK's examples answer). */
const notAllowed = { jsonrpc: '2.0', error: { code: -32000, message: 'Method not allowed: this MCP endpoint is stateless; send JSON-RPC messages with POST' }, id: null };

/**
 * `/mcp`: the fleet as an MCP server over Streamable HTTP, stateless — each
 * POST is authenticated with the dispatcher's bearer tokens and served by its
 * own server and transport. There are no sessions, so GET (a standalone
 * notification stream) and DELETE (ending a session) answer 405.
 */
export function mcpRoutes(deps: McpDeps, options: McpOptions = {}) {
  const inFlight = new InFlightCalls();
  // Subscribed on the first MCP request: a process that holds no request has nothing a relayed cancellation could reach.
  let listening: Promise<void> | undefined;
  const listen = (): Promise<void> | undefined =>
    deps.cancelBus === undefined
      ? undefined
      : (listening ??= deps.cancelBus.subscribe((cancel) => inFlight.cancel(cancel.client, cancel.requestId, cancel.reason)).catch((err: unknown) => {
          listening = undefined;
          throw err;
        }));
  const pageSize = options.pageSize ?? DEFAULT_PAGE_SIZE;
  const version = dispatcherVersion();
  return (app: FastifyInstance): void => {
    // JSON is parsed here (as everywhere: `__proto__` refused) into an McpBody, so that a body which is not JSON
    // is answered as JSON-RPC says (-32700) rather than with the /v1 error body. This plugin's routes only.
    // JSON.parse defines `__proto__` as an own key and touches no prototype; such keys are then decided on (prototypeProblem).
    app.removeContentTypeParser('application/json');
    app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, body, done) => {
      const text = typeof body === 'string' ? body : body.toString('utf8');
      let value: unknown;
      try {
        value = JSON.parse(text);
      } catch {
        done(null, new McpBody(undefined, 'not-json'));
        return;
      }
      const problem = prototypeProblem(text, value);
      done(null, new McpBody(problem === undefined ? value : problem === 'forbidden-argument' ? value : undefined, problem));
    });
    // A body no parser here reads (anything but application/json, or no content-type) is refused by fastify before the
    // route runs; on /mcp that refusal is JSON-RPC too, naming the type sent. Every other error goes on to the app's handler.
    app.setErrorHandler((error, request, reply) => {
      if (!isUnreadMediaType(error)) throw error;
      const refused = mediaTypeRefusal(mediaTypeOf(request.headers['content-type']));
      request.log.info({ code: refused.body.error.code }, 'MCP message refused');
      // Refused before its body was read: the rest of it is not waited for (as the app's handler does).
      if (!request.raw.complete) void reply.header('connection', 'close');
      return reply.status(refused.status).type('application/json').send(refused.body);
    });
    app.post('/mcp', async (request, reply) => {
      // Refused here, before the transport: a 401 with the usual error body (and an audit entry).
      const caller = await deps.auth.caller(request.headers);
      // What the SDK would refuse wrongly (202 for `[]`, -32700 for `1`, -32603 and a zod dump for bad params): see checkBody.
      const body = request.body instanceof McpBody ? request.body : undefined;
      const protocolVersion = request.headers['mcp-protocol-version'];
      if (body?.problem === 'forbidden-argument') {
        const answer = forbiddenArgumentAnswer(body.json as Parameters<typeof forbiddenArgumentAnswer>[0], deps.calls.argumentLimits);
        request.log.info('MCP tools/call refused: a prototype key in its arguments');
        return reply.status(200).type('application/json').send(answer);
      }
      const refused = body === undefined ? undefined : body.problem !== undefined ? parseRefusal(body.problem) : checkBody(body.json, typeof protocolVersion === 'string' ? protocolVersion : undefined);
      if (refused !== undefined) {
        request.log.info({ code: refused.body.error.code }, 'MCP message refused');
        return reply.status(refused.status).type('application/json').send(refused.body);
      }
      await listen();
      const cx: Context = { deps, caller, client: InFlightCalls.clientOf(request.headers), inFlight, cancelBus: deps.cancelBus, pageSize, log: request.log, version };
      const direct = body === undefined ? undefined : directCallOf(body.json, request.headers);
      if (direct !== undefined) {
        void reply.hijack();
        await answerDirectly(cx, direct, reply.raw);
        return;
      }
      const server = serverFor(cx);
      // Stateless: no `sessionIdGenerator` (the SDK's `sessionIdGenerator: undefined`, which exactOptionalPropertyTypes spells by omission).
      const transport = new StreamableHTTPServerTransport({});
      // Yet each client is given a session id at `initialize`, which it sends with every request after: it holds no state
      // here (any id is taken, none ever ends), and only tells one client's requests from another's of the same token,
      // whose JSON-RPC ids collide (see InFlightCalls).
      if (isInitialize(body?.json)) reply.raw.setHeader('mcp-session-id', randomUUID());
      await server.connect(transport);
      // Once the answer is written, or the client has gone: a call still running then is cancelled (see callTool).
      reply.raw.once('close', () => {
        server.close().catch((err: unknown) => request.log.warn({ err }, 'closing an MCP server failed'));
      });
      void reply.hijack();
      try {
        await transport.handleRequest(request.raw, reply.raw, body?.json);
      } catch (err) {
        request.log.error({ err }, 'MCP request failed');
        if (!reply.raw.headersSent) reply.raw.writeHead(500, { 'content-type': 'application/json' });
        reply.raw.end(JSON.stringify({ jsonrpc: '2.0', error: { code: ErrorCode.InternalError, message: 'internal error' }, id: null }));
      }
    });
    for (const method of ['GET', 'DELETE'] as const) {
      app.route({ method, url: '/mcp', handler: (_request, reply) => reply.status(405).header('allow', 'POST').send(notAllowed) });
    }
  };
}
