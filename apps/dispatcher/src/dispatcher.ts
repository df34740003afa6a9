import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { type RedisTarget, ScopeRegistry, type TokenVerifier, ToolScope } from '@forge-fleet/shared';
import { FleetMetrics, MeteredAuditLogger, ToolTracer, type Tracing } from '@forge-fleet/telemetry';
import { AuditArchivist, AuditReader, CallStore, Catalog, closeRedis, connectRedis, KeyChecks, McpCancelRelay, QueueStatsReader, RedisAuditLogger, RedisRiskSignalQueue, ReplyInbox, TierQueues, fleetKeys } from '@forge-fleet/store';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { buildApp } from './app.js';
import { approvalDeadlineOf, approvalHandlerOf, type LoadedPolicy } from './approvals/policy-file.js';
import { DecisionAudit } from './audit/decisions.js';
import type { DoorOptions } from './http/door-options.js';
import { Authenticator } from './auth/authenticator.js';
import { CatalogView } from './catalog/catalog-view.js';
import { type ArgumentLimits, DEFAULT_ARGUMENT_LIMITS } from './limits/arguments.js';
import { CallService } from './pipeline/call-service.js';
import { PackRouter } from './routing/pack-router.js';
import { StrandedCalls } from './routing/stranded-calls.js';
import { CallSigner } from './signing/call-signer.js';
import { KeyCheckPublisher } from './signing/key-check-publisher.js';
import { ApprovalService } from './approvals/approval-service.js';

/** Everything a dispatcher instance is configured with. */
export interface DispatcherOptions {
  /** The fleet's Redis (REDIS_URL): one server or a Redis Cluster. */
  readonly redis: RedisTarget;
  readonly prefix: string;
  readonly retentionMs: number;
  readonly bodyLimit: number;
  /** Limits on each call's arguments. @defaultValue {@link DEFAULT_ARGUMENT_LIMITS} */
  readonly limits?: ArgumentLimits;
  /**
   * The audit keeper's Redis user: files the writers' entries into the audit stream (the one user that may
   * write it) and reads it for `GET /v1/audit`. @defaultValue redis
   */
  readonly auditRedis?: RedisTarget;
  /** Verifies agent capability tokens; `undefined` only with `devMode`. */
  readonly tokens: TokenVerifier | undefined;
  /** Serve anonymous callers (no grants, scope from `x-forge-task`). Development only. */
  readonly devMode: boolean;
  /** Approval handler, people-in-the-loop tools and deadlines, and scopes per task type (a policy file, or the environment). */
  readonly policy: LoadedPolicy;
  readonly catalogRefreshMs: number;
  /** The fleet's call-signing secret (workers get keys derived from it per queue). */
  readonly signingSecret: Buffer;
  /** How long a call's signature holds after enqueueing. @defaultValue retentionMs */
  readonly callValidityMs?: number;
  readonly log: Logger;
  /** @defaultValue `<hostname>-<pid>-<random>` */
  readonly id?: string;
  /** Tracing set up from the OTEL_* variables (main.ts); off when undefined. */
  readonly tracing?: Tracing | undefined;
  /** Timeouts, connection caps, allowed hosts and origins of the HTTP server. @defaultValue each option's default */
  readonly doors?: Readonly<DoorOptions> | undefined;
}

/** A running dispatcher instance (not yet listening: call `app.listen`). */
export interface Dispatcher {
  readonly id: string;
  readonly app: FastifyInstance;
  /** Stops accepting requests, answers those in flight, then closes its connections. */
  close(): Promise<void>;
}

/** Connects to Redis, reads the catalog and builds the HTTP app. */
export async function createDispatcher(o: DispatcherOptions): Promise<Dispatcher> {
  const id = o.id ?? `d-${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;
  const keys = fleetKeys(o.prefix);
  const redis = connectRedis(o.redis, 'command', o.log);
  const blocking = connectRedis(o.redis, 'blocking', o.log);
  const subscriber = connectRedis(o.redis, 'blocking', o.log);
  // BullMQ defines dozens of scripts on its connection and ioredis copies them onto every auto-pipeline;
  // keeping the queues on a connection of their own keeps the request path's pipelines cheap.
  const queueConnection = connectRedis(o.redis, 'queue', o.log);
  const log = o.log.child({ dispatcherId: id });
  const { policy } = o.policy;
  const scopes = new ScopeRegistry(policy.defaultScope.length === 1 && policy.defaultScope[0] === '*' ? ToolScope.full() : ToolScope.allow(policy.defaultScope));
  for (const [task, patterns] of Object.entries(policy.scopes)) scopes.register(task, ToolScope.allow(patterns));

  // The audit keeper's user, on a connection of its own when its URL differs (under the fleet ACL it must).
  const auditConnection = o.auditRedis === undefined || o.auditRedis.url === o.redis.url ? undefined : connectRedis(o.auditRedis, 'command', o.log);
  const catalog = new CatalogView(new Catalog(redis, keys), o.prefix, o.catalogRefreshMs, log);
  const store = new CallStore(redis, keys, o.retentionMs);
  // GET /v1/queues and the queue gauges of /metrics read the same counts.
  const queueStats = new QueueStatsReader({ redis, queueConnection, keys });
  const metrics = new FleetMetrics('dispatcher', { queues: () => queueStats.read(), approvalsPending: () => store.pendingApprovals() }, { dispatcher: id });
  metrics.knownTools((name) => catalog.definitionOf(name) !== undefined);
  // Every decision passes through the audit sink: outcomes are counted there (see MeteredAuditLogger).
  const archivist = new AuditArchivist({ redis: auditConnection ?? redis, keys, lanes: () => catalog.lanes(), log });
  const audit = new DecisionAudit(new MeteredAuditLogger(new RedisAuditLogger(redis, keys, 'dispatcher', { afterWrite: () => archivist.soon() }), metrics), log);
  const inbox = new ReplyInbox(blocking, keys, id, { onError: (err) => log.error({ err }, 'reply inbox error') });
  const queues = new TierQueues(queueConnection, keys, o.retentionMs);
  const signer = new CallSigner(o.signingSecret, o.prefix, o.callValidityMs ?? o.retentionMs);
  const router = new PackRouter(catalog);
  // One set of argument limits for every way arguments enter: submissions, and a person's edit of a waiting call.
  const limits = o.limits ?? DEFAULT_ARGUMENT_LIMITS;
  const keyChecks = new KeyCheckPublisher(o.signingSecret, o.prefix, new KeyChecks(redis, keys), log);
  // After every catalog read: calls left on a pack that lost its workers move on (or end), and the inbox follows the lanes.
  const stranded = new StrandedCalls({ queues, store, router, catalog, audit, log });
  catalog.onRead((snapshot) => stranded.sweep(snapshot));
  catalog.onRead(() => inbox.lanes(catalog.lanes()));
  catalog.onRead(() => void keyChecks.publish(catalog.lanes()));
  const calls = new CallService({
    dispatcherId: id,
    keys,
    store,
    queues,
    signer,
    approvalDeadlineFor: approvalDeadlineOf(policy),
    inbox,
    catalog,
    router,
    approval: approvalHandlerOf(policy),
    audit,
    limits,
    risk: new RedisRiskSignalQueue(redis, keys, 'dispatcher', (err) => log.error({ err }, 'risk signal write failed')),
    log,
    tracer: o.tracing === undefined ? undefined : ToolTracer.of(o.tracing),
  });
  const approvals = new ApprovalService({ store, queues, signer, catalog, router, audit, limits, log });
  await catalog.start({ subscriber });
  await archivist.start();
  inbox.start();
  approvals.start();
  let shuttingDown = false;
  const app = buildApp({
    closing: () => shuttingDown,
    calls,
    approvals,
    policy: o.policy,
    catalog,
    auth: new Authenticator({ verifier: o.tokens, devMode: o.devMode, scopes }),
    ready: async () => (await redis.ping()) === 'PONG',
    log,
    bodyLimit: o.bodyLimit,
    audit,
    auditReader: new AuditReader(auditConnection ?? redis, keys, archivist),
    queueStats,
    metrics,
    mcpCancelBus: new McpCancelRelay(redis, subscriber, keys, id, log),
    doors: o.doors,
  });
  let closed: Promise<void> | undefined;
  return {
    id,
    app,
    close: () =>
      (closed ??= (async () => {
        // Stop accepting, then answer the requests still waiting for results with their calls' current status.
        shuttingDown = true;
        const closing = app.close();
        inbox.releaseAll();
        await closing;
        catalog.stop();
        approvals.stop();
        await stranded.settled();
        await inbox.stop();
        await queues.close();
        await queueStats.close();
        // What this dispatcher wrote last is filed now, not left for another keeper (or none).
        archivist.stop();
        await archivist.drain().catch((err: unknown) => log.warn({ err }, 'audit entries left in their inboxes at shutdown'));
        await closeRedis(queueConnection);
        await closeRedis(subscriber);
        if (auditConnection !== undefined) await closeRedis(auditConnection);
        await closeRedis(redis);
      })()),
  };
}
