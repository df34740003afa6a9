import { fastify, type FastifyBaseLogger, type FastifyInstance, LogController } from 'fastify';
import type { AuditReader, QueueStatsReader } from '@forge-fleet/store';
import type { FleetMetrics } from '@forge-fleet/telemetry';
import type { Logger } from 'pino';
import type { DecisionAudit } from './audit/decisions.js';
import type { Authenticator } from './auth/authenticator.js';
import type { CatalogView } from './catalog/catalog-view.js';
import type { ApprovalService } from './approvals/approval-service.js';
import type { LoadedPolicy } from './approvals/policy-file.js';
import { consoleRoutes } from './console/console-routes.js';
import { approvalRoutes } from './http/approvals.js';
import { policyRoutes } from './http/policy.js';
import { auditRoutes } from './http/audit.js';
import { callRoutes, STREAM_MAX_AGE_MS } from './http/calls.js';
import { clientErrorHandler, frameworkErrorHandler, MAX_PARAM_CHARS } from './http/client-errors.js';
import { ConnectionGate } from './http/connection-gate.js';
import { type DoorOptions, resolveDoorOptions, streamBodyTimeoutMs } from './http/door-options.js';
import { registerDoors } from './http/doors.js';
import { registerErrorHandling } from './http/errors.js';
import { jsonBodies } from './http/json-body.js';
import { healthRoutes } from './http/health.js';
import { openapiRoutes } from './http/openapi.js';
import { queueRoutes } from './http/queues.js';
import { metricsRoutes } from './http/metrics.js';
import { toolRoutes } from './http/tools.js';
import type { McpCancelBus } from './mcp/cancel-bus.js';
import { mcpRoutes } from './mcp/mcp-routes.js';
import type { CallService } from './pipeline/call-service.js';

/** What the HTTP app needs; main.ts builds these from the environment, tests from a real Redis. */
export interface AppDeps {
  readonly calls: CallService;
  readonly approvals: ApprovalService;
  readonly policy: LoadedPolicy;
  readonly catalog: CatalogView;
  readonly auth: Authenticator;
  readonly ready: () => Promise<boolean>;
  readonly log: Logger;
  readonly bodyLimit: number;
  /** Receives listings and refused requests (the call service writes call decisions). */
  readonly audit: DecisionAudit;
  /** Reads the audit stream for `GET /v1/audit`. */
  readonly auditReader: AuditReader;
  /** Reads job counts and live workers per queue for `GET /v1/queues`. */
  readonly queueStats: QueueStatsReader;
  /** Served at `/metrics`. */
  readonly metrics: FleetMetrics;
  /** Relays MCP cancellations between dispatchers; without it, a cancellation reaches only calls held in this process. */
  readonly mcpCancelBus?: McpCancelBus | undefined;
  /** True once the dispatcher is shutting down: answers then close their connections. */
  readonly closing?: () => boolean;
  /** Timeouts, connection caps, allowed hosts and origins (see http/door-options.ts). @defaultValue each option's default */
  readonly doors?: Readonly<DoorOptions> | undefined;
}

/** The dispatcher's HTTP API (see docs/http-api.md), as a fastify instance not yet listening. */
export function buildApp(deps: AppDeps): FastifyInstance {
  // Typed as fastify's logger so the instance keeps fastify's default type parameters.
  const logger: FastifyBaseLogger = deps.log;
  const doors = deps.doors ?? resolveDoorOptions();
  const app = fastify({
    loggerInstance: logger,
    bodyLimit: deps.bodyLimit,
    // Headers must arrive within headersTimeoutMs (checked every second, not Node's 30 s), a body within
    // bodyTimeoutMs of them (the door's own timer, which knows that a call stream's body lives longer).
    // Node's requestTimeout, which covers receiving the whole request and never the wait for a result
    // after it, is only the backstop above the longest body. No idle-socket timeout (connectionTimeout 0):
    // an MCP tools/call may wait round after round, minutes, with no byte written.
    http: { headersTimeout: doors.headersTimeoutMs, connectionsCheckingInterval: Math.min(1000, doors.headersTimeoutMs) },
    requestTimeout: doors.headersTimeoutMs + streamBodyTimeoutMs(doors, STREAM_MAX_AGE_MS),
    connectionTimeout: 0,
    keepAliveTimeout: 65_000,
    // Under routerOptions: fastify 5 warns (FSTDEP022) at every start when router options sit at the top level.
    routerOptions: { maxParamLength: MAX_PARAM_CHARS },
    clientErrorHandler: clientErrorHandler(logger, doors.headersTimeoutMs),
    frameworkErrors: frameworkErrorHandler,
    // Each call logs its own lifecycle lines (with callId, tool, tier); per-request lines would double them.
    logController: new LogController({ disableRequestLogging: true }),
  });
  // JSON bodies are parsed by http/json-body.ts: prototype keys refused with a message naming them (the call routes
  // leave them to the call's own check, so each call is answered alike on every entrance).
  jsonBodies(app, 'refuse');
  // No route reads text: without fastify's own text/plain parser such a body is refused 415 with the type sent, as any
  // other type is, rather than handed to a route as a string that then fails its schema (400).
  app.removeContentTypeParser('text/plain');
  const gate = new ConnectionGate(doors);
  gate.attach(app.server);
  registerDoors(app, { auth: deps.auth, options: doors, gate, streamMaxAgeMs: STREAM_MAX_AGE_MS });
  registerErrorHandling(app, deps.bodyLimit, deps.audit);
  // A keep-alive connection that turns idle after close() began would hold the server open
  // until its keep-alive timeout; answers given while closing end their connection instead.
  // A callback hook, not an async one: it runs for every answer, and an async hook costs a promise each.
  app.addHook('onSend', (_request, reply, payload, done) => {
    if (deps.closing?.() === true) void reply.header('connection', 'close');
    done(null, payload);
  });
  void app.register(healthRoutes(deps.ready));
  void app.register(toolRoutes(deps.catalog, deps.auth, deps.audit));
  void app.register(callRoutes(deps.calls, deps.auth, { closing: deps.closing, maxLineChars: deps.bodyLimit }));
  void app.register(approvalRoutes(deps.approvals, deps.auth));
  void app.register(policyRoutes(deps.policy, deps.auth));
  void app.register(auditRoutes(deps.auditReader, deps.auth));
  void app.register(queueRoutes(deps.queueStats, deps.auth));
  void app.register(metricsRoutes(deps.metrics));
  void app.register(mcpRoutes({ ...deps, cancelBus: deps.mcpCancelBus }));
  void app.register(openapiRoutes());
  void app.register(consoleRoutes());
  return app;
}
