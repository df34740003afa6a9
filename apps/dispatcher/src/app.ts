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
import { callRoutes } from './http/calls.js';
import { registerErrorHandling } from './http/errors.js';
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
}

/** The dispatcher's HTTP API (see docs/http-api.md), as a fastify instance not yet listening. */
export function buildApp(deps: AppDeps): FastifyInstance {
  // Typed as fastify's logger so the instance keeps fastify's default type parameters.
  const logger: FastifyBaseLogger = deps.log;
  const app = fastify({
    loggerInstance: logger,
    bodyLimit: deps.bodyLimit,
    // secure-json-parse's defaults, stated: a body with `__proto__`, or `constructor.prototype`, is refused (400).
    // Arguments are checked again, for those keys and `prototype` anywhere (limits/arguments.ts).
    onProtoPoisoning: 'error',
    onConstructorPoisoning: 'error',
    // Calls may wait up to 60 s for a result.
    requestTimeout: 0,
    keepAliveTimeout: 65_000,
    // Each call logs its own lifecycle lines (with callId, tool, tier); per-request lines would double them.
    logController: new LogController({ disableRequestLogging: true }),
  });
  registerErrorHandling(app, deps.bodyLimit, deps.audit);
  // A keep-alive connection that turns idle after close() began would hold the server open
  // until its keep-alive timeout; answers given while closing end their connection instead.
  app.addHook('onSend', async (_request, reply, payload) => {
    if (deps.closing?.() === true) void reply.header('connection', 'close');
    return payload;
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
