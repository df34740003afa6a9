import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { type CallEnvelope, ConfigInvalidError, laneOf, queueName, type RedisTarget, type Tier, type Tool, type ToolDefinition, WorkerLostError } from '@forge-fleet/shared';
import { Catalog, CallerSessions, CallStore, callsOfJob, closeRedis, connectRedis, directPackOf, idleFetch, KeyChecks, openQueue, packOf, RedisAuditLogger, type RedisConnection, RedisRiskSignalQueue, ReplyPublisher, fleetKeys, packQueueName } from '@forge-fleet/store';
import { type FleetMetrics, MeteredAuditLogger, type ToolTracer } from '@forge-fleet/telemetry';
import { type Job, type Queue, UnrecoverableError, Worker } from 'bullmq';
import type { Logger } from 'pino';
import { CallAnswers } from '../answer/call-answers.js';
import type { ActiveRun } from '../run/active-run.js';
import { CallRunner } from '../run/call-runner.js';
import { type CallerSessionSource, callerSessionOf } from '../tools/caller-session.js';
import { CallSlots } from './call-slots.js';
import { JobFetchGovernor } from './job-fetch-governor.js';
import { LaneKeyCheck } from './lane-key-check.js';
import { LapsedPacks } from './lapsed-packs.js';

/** How a worker pool runs. */
export interface WorkerPoolOptions {
  /** The fleet's Redis (REDIS_URL): one server or a Redis Cluster. */
  readonly redis: RedisTarget;
  readonly prefix: string;
  readonly tier: Tier;
  /** Host pools only. */
  readonly pool?: string | undefined;
  /** The tools this pool serves (already filtered to its tier and pool). */
  readonly tools: readonly Tool[];
  /** Names its tool pack (`--pack`), so its queue name is known in advance. @defaultValue a hash of its tools */
  readonly pack?: string | undefined;
  readonly concurrency: number;
  readonly lockDurationMs: number;
  readonly leaseMs: number;
  /** How long start waits for a dispatcher to publish the lane's key check before it goes on unverified. @defaultValue 3000 */
  readonly keyCheckWaitMs?: number | undefined;
  readonly shutdownGraceMs: number;
  readonly retentionMs: number;
  /** Runs of a retryable tool in all, stalls included. */
  readonly retryAttempts: number;
  /** First retry delay, doubled for each further retry. */
  readonly retryBackoffMs: number;
  readonly id?: string | undefined;
  /**
   * Who holds the callers' sessions this pool's servers keep (see caller-session.ts): the worker process, the same
   * for each generation of its pool, since the sessions live in its servers' pools. @defaultValue the pool's id
   */
  readonly sessionHolder?: string | undefined;
  /** The key that verifies the dispatchers' signatures on this lane's calls. */
  readonly callKey: Uint8Array;
  /** Largest result (bytes of JSON) a call may end with; larger ones end as RESOURCE_LIMIT. */
  readonly maxResultBytes: number;
  /** Shortest time between two progress reports of one call leaving this worker. @defaultValue 200 */
  readonly progressIntervalMs?: number | undefined;
  /**
   * How long a lapsed worker-own pack of the lane must stay lapsed before this worker prunes it from the catalog
   * (see lapsed-packs.ts). @defaultValue 600000 (10 minutes)
   */
  readonly packPruneAfterMs?: number | undefined;
  /**
   * Whether its announcement replaces a tool's definition that other live workers serve otherwise, rather than being
   * refused (see Catalog.announce): a generation started for an MCP server's changed list, which the other workers
   * of the server take in turn. @defaultValue false
   */
  readonly takeOverDefinitions?: boolean | undefined;
  /** Counts outcomes (through the audit sink) and times runs. */
  readonly metrics?: FleetMetrics | undefined;
  /** Wraps each run in its `execute_tool` span; undefined while tracing is off (see ToolTracer.of). */
  readonly tracer?: ToolTracer | undefined;
  /** Told when the pool finds after start that it must not go on (its call key proved wrong); the process should stop and exit. */
  readonly onFatal?: ((error: unknown) => void) | undefined;
  readonly log: Logger;
}

/** Connections and parts that exist while the pool runs. */
interface Running {
  readonly redis: RedisConnection;
  readonly catalog: Catalog;
  readonly keyCheck: LaneKeyCheck;
  readonly runner: CallRunner;
  readonly sessions: CallerSessions;
}

/** How long past its grace period a stopping pool waits for Redis to take its last commands before it drops its connections. */
const CLOSE_MARGIN_MS = 2000;
/** How long a worker that handed a call back for want of a slot takes no job, so that another worker takes it. */
const HAND_BACK_PAUSE_MS = 250;
/** How long a read of the pack's live workers is taken as current. */
const OTHERS_FRESH_MS = 1000;
/** How long a worker-own pack stays lapsed before it is pruned, unless the options say (see lapsed-packs.ts). */
const PACK_PRUNE_AFTER_MS = 600_000;
/** Longest time between two looks for lapsed worker-own packs to prune. */
const PRUNE_LOOK_MS = 60_000;

/**
 * A worker of one tool pack in one lane: announces its tools, takes jobs off
 * its pack's queue only while call slots are spare (see JobFetchGovernor),
 * and hands each call to the CallRunner. Owns the lifecycle: the key check
 * before anything is announced, the catalog lease, the cancel channel, the
 * graceful stop.
 */
export class WorkerPool {
  readonly id: string;
  /** Its tool pack's queue: only workers serving exactly these tools (and definitions) take calls from it. */
  readonly queue: string;
  /** The lane's queue name: what its calls' signing key derives from. */
  readonly laneQueue: string;
  /** The key space of this pool's calls (records, reply lists, cancel channel): its Redis user may touch no other. */
  readonly lane: string;
  readonly #o: WorkerPoolOptions;
  readonly #tools: Map<string, Tool>;
  readonly #keys;
  readonly #slots: CallSlots;
  #running: Running | undefined;
  #subscriber: RedisConnection | undefined;
  #worker: Worker | undefined;
  #governor: JobFetchGovernor | undefined;
  #workerConnection: RedisConnection | undefined;
  #queue: Queue | undefined;
  #queueConnection: RedisConnection | undefined;
  #leaseTimer: NodeJS.Timeout | undefined;
  #pruneTimer: NodeJS.Timeout | undefined;
  #stopping = false;
  readonly #packId: string;
  /** Ends a pause in taking jobs (see #pauseFetching). */
  #resumeTimer: NodeJS.Timeout | undefined;
  /** Whether another live worker serves this pack, as last read (see #othersServe). */
  #othersKnown: { readonly at: number; readonly answer: Promise<boolean> } | undefined;
  /** The servers among its tools that keep a session per caller, one source each; empty for most pools. */
  readonly #sessionSources: readonly CallerSessionSource[];
  /** This worker's own queue (see directPackOf), where other workers send calls of the callers whose sessions it holds. */
  readonly directQueue: string | undefined;
  /** Who holds this pool's callers' sessions (the worker process), and the queue calls reach it by. */
  readonly #holder: { readonly process: string; readonly queue: string };
  #directWorker: Worker | undefined;
  #directConnection: RedisConnection | undefined;
  /** Other workers' own queues, opened on the retry queue's connection as calls are sent on to them. */
  readonly #sendOnQueues = new Map<string, Queue>();

  constructor(options: WorkerPoolOptions) {
    this.#o = options;
    this.id = options.id ?? `${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;
    this.laneQueue = queueName(options.prefix, options.tier, options.pool);
    this.#packId = packOf(options.tools.map((t) => t.definition), options.pack).id;
    this.queue = packQueueName(this.laneQueue, this.#packId);
    this.#tools = new Map(options.tools.map((t) => [t.definition.name, t]));
    this.#keys = fleetKeys(options.prefix);
    this.lane = laneOf(options.tier, options.pool);
    this.#slots = new CallSlots(options.concurrency);
    const sources = new Map<string, CallerSessionSource>();
    for (const t of options.tools) {
      const source = callerSessionOf(t.executor);
      if (source !== undefined && !sources.has(source.server)) sources.set(source.server, source);
    }
    this.#sessionSources = [...sources.values()];
    this.directQueue = this.#sessionSources.length === 0 ? undefined : packQueueName(this.laneQueue, directPackOf(packOf(options.tools.map((t) => t.definition), options.pack), this.id).id);
    this.#holder = { process: options.sessionHolder ?? this.id, queue: this.directQueue ?? '' };
  }

  /**
   * Checks its call key, announces the tools, then starts taking calls.
   * @throws ConfigInvalidError when FORGE_CALL_KEY is not this lane's key.
   * @throws RegistryError when a live worker serves one of the tools with another definition.
   */
  async start(): Promise<void> {
    const o = this.#o;
    const redis = connectRedis(o.redis, 'command', o.log);
    const store = new CallStore(redis, this.#keys, o.retentionMs);
    const rawAudit = new RedisAuditLogger(redis, this.#keys, this.lane);
    // Every outcome this worker decides is audited: outcomes are counted there (see MeteredAuditLogger).
    const audit = o.metrics === undefined ? rawAudit : new MeteredAuditLogger(rawAudit, o.metrics);
    const answers = new CallAnswers({ lane: this.lane, queue: this.queue, workerId: this.id, store, replies: new ReplyPublisher(redis, this.#keys), audit, maxResultBytes: o.maxResultBytes, log: o.log });
    const runner = new CallRunner({
      lane: this.lane,
      queue: this.queue,
      tier: o.tier,
      pool: o.pool,
      workerId: this.id,
      tools: this.#tools,
      callKey: o.callKey,
      store,
      answers,
      audit,
      risk: new RedisRiskSignalQueue(redis, this.#keys, this.lane, (err) => o.log.error({ err }, 'risk signal write failed')),
      retryQueue: () => this.#retryQueue(),
      retryAttempts: o.retryAttempts,
      retryBackoffMs: o.retryBackoffMs,
      progressIntervalMs: o.progressIntervalMs ?? 200,
      othersServe: () => this.#othersServe(catalog),
      onHandedBack: () => this.#pauseFetching(),
      sessions:
        this.directQueue === undefined
          ? undefined
          : {
              place: (server, caller, claim) => sessions.place(this.lane, server, caller, this.#holder, o.leaseMs, claim),
              release: (server, caller) => sessions.release(this.lane, server, [caller], this.#holder),
              queue: (name) => this.#sendOnQueue(name),
            },
      metrics: o.metrics,
      tracer: o.tracer,
      log: o.log,
    });
    const keyCheck = new LaneKeyCheck({ lane: this.lane, tier: o.tier, pool: o.pool, workerId: this.id, callKey: o.callKey, checks: new KeyChecks(redis, this.#keys), log: o.log });
    const catalog = new Catalog(redis, this.#keys);
    const sessions = new CallerSessions(redis, this.#keys);
    this.#running = { redis, catalog, keyCheck, runner, sessions };
    // Before anything is announced: a worker whose key cannot verify its lane's calls must never take one.
    await keyCheck.verify(o.keyCheckWaitMs ?? 3000);
    const definitions = [...this.#tools.values()].map((t) => t.definition);
    const takeOver = o.takeOverDefinitions === true;
    await catalog.announce(this.lane, this.id, definitions, o.leaseMs, { pack: o.pack, takeOver });
    // Its own queue first: a call sent on to it must find a worker, and dispatchers re-home what it holds if it dies.
    if (this.directQueue !== undefined) await catalog.announce(this.lane, this.id, definitions, o.leaseMs, { pack: o.pack, direct: true });
    this.#leaseTimer = setInterval(() => {
      catalog.renew(this.lane, this.id, definitions, o.leaseMs, { pack: o.pack }).catch((err: unknown) => o.log.error({ err }, 'catalog lease renewal failed'));
      if (this.directQueue !== undefined) this.#renewSessions(catalog, sessions, definitions);
      if (!keyCheck.verified) keyCheck.verify(0).catch((err: unknown) => this.#wrongKey(err));
    }, Math.max(100, Math.floor(o.leaseMs / 3)));
    const pruneAfterMs = o.packPruneAfterMs ?? PACK_PRUNE_AFTER_MS;
    const lapsed = new LapsedPacks(catalog, this.lane, pruneAfterMs, o.log);
    this.#pruneTimer = setInterval(() => {
      lapsed.sweep().catch((err: unknown) => o.log.warn({ err }, 'could not prune lapsed packs from the catalog'));
    }, Math.min(PRUNE_LOOK_MS, Math.max(100, Math.floor(pruneAfterMs / 2))));
    this.#pruneTimer.unref();

    this.#subscriber = connectRedis(o.redis, 'blocking', o.log);
    await CallStore.onCancelSignal(this.#subscriber, this.#keys, this.lane, (callId) => runner.stop(callId, 'cancelled by its caller'));

    this.#worker = new Worker(this.queue, (job, _token, signal) => this.#process(job, signal), {
      connection: (this.#workerConnection = connectRedis(o.redis, 'blocking', o.log)),
      ...this.#lockOptions(),
      // Governed from here on (see JobFetchGovernor): a job is fetched only when a call slot is spare.
      concurrency: 1,
      // An idle worker's fetch after a wake-up asks whether the queue is empty instead of running moveToActive twice more.
    }, idleFetch(redis));
    const worker = this.#worker;
    this.#governor = new JobFetchGovernor(this.#slots, (jobs) => (worker.concurrency = jobs));
    worker.on('error', (err) => o.log.error({ err }, 'worker error'));
    await worker.waitUntilReady();
    if (this.directQueue !== undefined) {
      this.#directWorker = new Worker(this.directQueue, (job, _token, signal) => this.#processSentOn(job, signal), {
        connection: (this.#directConnection = connectRedis(o.redis, 'blocking', o.log)),
        ...this.#lockOptions(),
        // What comes here is already this worker's: it waits for a call slot here like any call taken.
        concurrency: o.concurrency,
      });
      this.#directWorker.on('error', (err) => o.log.error({ err }, 'worker error (its own queue)'));
      await this.#directWorker.waitUntilReady();
      // Sessions this process holds from its previous generation are reached through this generation's queue now.
      this.#renewSessions(catalog, sessions, definitions);
    }
    // Tell dispatchers now rather than at their next periodic catalog read.
    await catalog.announce(this.lane, this.id, definitions, o.leaseMs, { notify: true, pack: o.pack, takeOver });
    o.log.info({ queue: this.queue, tools: definitions.map((d) => d.name), workerId: this.id, concurrency: o.concurrency }, 'worker pool ready');
  }

  /**
   * A key found wrong after start (no dispatcher had published a check then): stop taking calls and exit. Any other
   * failure of the check (Redis away for a while) is no verdict on the key: it is checked again at the next renewal.
   */
  #wrongKey(err: unknown): void {
    if (this.#stopping) return;
    if (!(err instanceof ConfigInvalidError)) {
      this.#o.log.warn({ err }, "could not read the lane's key check; trying again");
      return;
    }
    this.#o.log.fatal({ err }, "this worker's FORGE_CALL_KEY is not its lane's; stopping");
    this.#o.onFatal?.(err);
  }

  /**
   * The queue retries go back to, opened on first use with a connection of
   * its own: BullMQ defines dozens of scripts on a connection, and ioredis
   * copies them onto every auto-pipeline of that connection, which the hot
   * path's connection should not pay for.
   */
  #retryQueue(): Queue {
    if (this.#queue === undefined) {
      this.#queueConnection = connectRedis(this.#o.redis, 'queue', this.#o.log);
      this.#queue = openQueue(this.#queueConnection, this.#o.prefix, this.queue);
    }
    return this.#queue;
  }

  /** What its BullMQ Workers (of its pack's queue and of its own) share: locks, stall checks, the key prefix. */
  #lockOptions() {
    const o = this.#o;
    return {
      prefix: o.prefix,
      lockDuration: o.lockDurationMs,
      // Check often, so a dead worker's call is found within about one lock duration.
      stalledInterval: Math.max(500, Math.floor(o.lockDurationMs / 3)),
      // Stalls are counted by the call record (see CallRunner), never by BullMQ failing the job.
      maxStalledCount: 1000,
      autorun: true,
    };
  }

  /** Renews its own pack's lease and its hold on the callers' sessions its servers keep (set to its own queue). */
  #renewSessions(catalog: Catalog, sessions: CallerSessions, definitions: readonly ToolDefinition[]): void {
    const o = this.#o;
    catalog.renew(this.lane, this.id, definitions, o.leaseMs, { pack: o.pack, direct: true }).catch((err: unknown) => o.log.error({ err }, 'catalog lease renewal of its own queue failed'));
    for (const source of this.#sessionSources) {
      sessions
        .renew(this.lane, source.server, source.callers(), this.#holder, o.leaseMs)
        .then((elsewhere) => {
          // Held by another worker too (two came to hold a caller at once): the caller's calls go there from now on.
          for (const caller of elsewhere) source.giveUp(caller);
          if (elsewhere.length > 0) o.log.warn({ server: source.server, callers: elsewhere.length }, "gave up callers' sessions another worker holds");
        })
        .catch((err: unknown) => o.log.error({ err, server: source.server }, "renewal of the callers' sessions failed"));
    }
  }

  /** Another worker's own queue, to send a call on to it. */
  #sendOnQueue(name: string): Queue {
    let queue = this.#sendOnQueues.get(name);
    if (queue === undefined) {
      this.#retryQueue();
      queue = openQueue(this.#queueConnection!, this.#o.prefix, name);
      // Bounded: a worker's own queue changes with its generations and its restarts.
      if (this.#sendOnQueues.size >= 64) {
        const [oldest, open] = this.#sendOnQueues.entries().next().value!;
        this.#sendOnQueues.delete(oldest);
        void open.close();
      }
      this.#sendOnQueues.set(name, queue);
    }
    return queue;
  }

  /** Whether it takes calls: started, not stopping, its queue connection up. */
  get ready(): boolean {
    return this.#worker !== undefined && !this.#stopping && this.#workerConnection?.status === 'ready';
  }

  /** Calls running now. */
  get active(): number {
    return this.#running?.runner.active.size ?? 0;
  }

  /**
   * Gives up its leases on its tools' names, which refuse another definition
   * of a tool, but not its pack's: dispatchers go on routing calls to it, and
   * it goes on taking them, until {@link stop}. A new generation of this
   * worker that serves a tool under a changed definition can then announce
   * it, and once it has, this one stops: the calls its pack's queue still
   * holds are re-homed to the new one, instead of ending `NO_WORKER` for
   * want of any worker in between.
   */
  async stepAside(): Promise<void> {
    // No renewal from now on: one would announce the old definitions again. The pack's lease lasts its period,
    // longer than the new generation takes to announce itself.
    clearInterval(this.#leaseTimer);
    const running = this.#running;
    await running?.catalog.withdraw(this.lane, this.id, [...this.#tools.values()].map((t) => t.definition), this.#o.pack, { toolsOnly: true });
  }

  /**
   * Stops taking calls, gives up the catalog leases (dispatchers re-home what
   * its pack's queue still holds if it was the pack's last worker), hands
   * calls still waiting for a slot back to the queue, lets
   * active calls finish for the grace period, then aborts the rest (retryable
   * ones go back to the queue; others end with WORKER_LOST) and closes.
   *
   * @param options.graceMs how long active calls may go on. @defaultValue the pool's `shutdownGraceMs`
   */
  async stop(options: { readonly graceMs?: number } = {}): Promise<void> {
    if (this.#stopping) return;
    this.#stopping = true;
    const o = this.#o;
    clearInterval(this.#leaseTimer);
    clearInterval(this.#pruneTimer);
    clearTimeout(this.#resumeTimer);
    const running = this.#running;
    // With Redis away, its leases and holds lapse on their own: no write is waited for that may never be answered.
    const connected = running?.redis.status === 'ready';
    if (connected) {
      await running?.catalog.withdraw(this.lane, this.id, [...this.#tools.values()].map((t) => t.definition), o.pack, { direct: this.directQueue !== undefined }).catch(() => undefined);
      // Its callers' sessions end with it: their next calls are claimed by the workers that take them.
      for (const source of this.#sessionSources) {
        await running?.sessions.release(this.lane, source.server, source.callers(), this.#holder).catch(() => undefined);
      }
    } else {
      o.log.warn('stopping while Redis is away: its catalog leases and sessions lapse on their own');
    }
    // Calls waiting here for a slot (a call slot, or their MCP server's) have not started: they go back to the queue
    // now, for the pack's other workers.
    running?.runner.handBackWaiting();
    this.#slots.drain();
    const closing = Promise.all([this.#worker?.close(), this.#directWorker?.close()]);
    const graceMs = options.graceMs ?? o.shutdownGraceMs;
    const grace = setTimeout(() => {
      const active = running?.runner.active ?? new Map<string, ActiveRun>();
      if (active.size > 0) o.log.warn({ active: active.size }, 'grace period over: aborting active calls');
      for (const run of active.values()) run.stop(new WorkerLostError('call', 'shutdown'));
    }, graceMs);
    // BullMQ's close waits for Redis to take its last commands: with Redis away, for ever. Past the grace (at once,
    // when Redis is away and no call runs) the pool's connections are dropped, which ends those waits.
    // BullMQ itself may then wait for a connection that never comes back: it is waited for a moment more, no longer.
    const idle = !connected && (running?.runner.active.size ?? 0) === 0;
    let drop: NodeJS.Timeout | undefined;
    const dropped = new Promise<void>((resolve) => {
      drop = setTimeout(
        () => {
          o.log.warn("Redis did not take the worker pool's last commands: dropping its connections");
          for (const connection of [this.#workerConnection, this.#directConnection, this.#queueConnection, this.#subscriber, running?.redis]) connection?.disconnect();
          setTimeout(resolve, CLOSE_MARGIN_MS).unref();
        },
        idle ? 0 : graceMs + CLOSE_MARGIN_MS,
      );
    });
    await Promise.race([closing, dropped]);
    clearTimeout(grace);
    clearTimeout(drop);
    if (this.#workerConnection) await closeRedis(this.#workerConnection);
    if (this.#directConnection) await closeRedis(this.#directConnection);
    await Promise.all([...this.#sendOnQueues.values()].map((q) => q.close()));
    await this.#queue?.close();
    if (this.#queueConnection !== undefined) await closeRedis(this.#queueConnection);
    if (this.#subscriber) await closeRedis(this.#subscriber);
    if (running) await closeRedis(running.redis);
    o.log.info('worker pool stopped');
  }

  /**
   * Whether another live worker serves this pack, read at most once a second (asked for each call that finds no
   * slot here, which a burst makes many).
   */
  #othersServe(catalog: Catalog): Promise<boolean> {
    const now = Date.now();
    if (this.#othersKnown === undefined || now - this.#othersKnown.at > OTHERS_FRESH_MS) {
      const asked = catalog.liveWorkers(this.lane, this.#packId).then((live) => live > 1);
      this.#othersKnown = { at: now, answer: asked };
      // A failed read says no: the call waits here, as it did before anyone asked.
      asked.catch(() => (this.#othersKnown = undefined));
    }
    return this.#othersKnown.answer.catch(() => false);
  }

  /**
   * Takes no job for a moment: a call this worker handed back for want of a slot is at the head of the queue, and
   * would otherwise be taken straight back here rather than by a worker with a free one. Jobs held go on.
   */
  #pauseFetching(): void {
    const worker = this.#worker;
    if (worker === undefined || this.#stopping) return;
    clearTimeout(this.#resumeTimer);
    void worker.pause(true);
    this.#resumeTimer = setTimeout(() => {
      this.#resumeTimer = undefined;
      if (!this.#stopping) void worker.resume();
    }, HAND_BACK_PAUSE_MS);
  }

  /**
   * A job's calls, and the set its running calls join. The job's signal (BullMQ's cancelJob) reaches its calls through
   * one listener, not one per call: adding and removing an EventTarget listener per call was measurable on the hot path.
   * @throws UnrecoverableError for a job that carries no call (BullMQ fails it for good).
   */
  #openJob(job: Job, bullSignal: AbortSignal | undefined): { envelopes: CallEnvelope[]; running: Set<ActiveRun> } {
    const envelopes = callsOfJob(job.data);
    if (envelopes.length === 0) {
      this.#o.log.error({ jobId: job.id, name: job.name }, 'job is neither a call envelope nor a batch; dropped');
      throw new UnrecoverableError('invalid call envelope');
    }
    const running = new Set<ActiveRun>();
    bullSignal?.addEventListener('abort', () => {
      for (const run of running) run.stop('cancelled by its caller');
    }, { once: true });
    return { envelopes, running };
  }

  /**
   * A job of its own queue: calls other workers sent on to it, each of a caller whose session it holds. They run
   * here in a call slot each, or go on to the worker that holds the session now, at most twice (see CallRunner.run).
   */
  async #processSentOn(job: Job, bullSignal?: AbortSignal): Promise<void> {
    const { runner } = this.#running!;
    const { envelopes, running } = this.#openJob(job, bullSignal);
    // How many times the call was sent on, as its job's id says (see CallRunner's send on).
    const hops = Number(/^s(\d+)-/.exec(job.id ?? '')?.[1] ?? 1);
    await Promise.all(
      envelopes.map((envelope) =>
        this.#slots.run(
          () => runner.run(envelope, running, hops),
          () => this.#governor?.govern(),
          // The worker stops: the call has not started, and goes back to the pack's queue (its session ends here).
          async () => {
            if ((await runner.handBack(envelope, 'shutdown')) === undefined) await runner.run(envelope, running, hops);
          },
        ),
      ),
    );
  }

  /** A job carries one call, or a batch of calls for this pack; each runs on its own in a call slot. */
  async #process(job: Job, bullSignal?: AbortSignal): Promise<void> {
    const { runner, keyCheck } = this.#running!;
    const governor = this.#governor!;
    const { envelopes, running } = this.#openJob(job, bullSignal);
    // Synchronously, before anything is awaited: BullMQ decides whether to fetch another job as soon as this
    // processor yields, and reads the job limit the governor sets now.
    governor.jobTaken(envelopes.length);
    try {
      if (!keyCheck.verified) {
        try {
          await keyCheck.verify(0);
        } catch (err) {
          // Not ours to run: hand the calls back to the queue for the pack's other workers, then stop.
          for (let i = 0; i < envelopes.length; i++) governor.callAsks();
          await this.#retryQueue().add(job.name, job.data, { removeOnComplete: true, removeOnFail: { age: 24 * 3600 } });
          this.#wrongKey(err);
          return;
        }
      }
      // A batch's calls past the call slots free here would wait for this worker's running calls to end: when another
      // live worker serves the pack, they go back to the queue for it (one read of the catalog, and only then).
      const elsewhere = envelopes.length > this.#slots.spare && (await this.#othersServe(this.#running!.catalog));
      let handedBack = false;
      const handBack = async (envelope: CallEnvelope, why: string): Promise<void> => {
        if ((await runner.handBack(envelope, why)) === 'handed back') handedBack = true;
        // Not handed back (Redis refused the add): it runs here after all.
        else await this.#slots.run(() => runner.run(envelope, running), () => governor.govern(), () => runner.run(envelope, running));
      };
      await Promise.all(
        envelopes.map((envelope) => {
          governor.callAsks();
          if (elsewhere && this.#slots.spare <= 0) return handBack(envelope, 'no free call slot here');
          return this.#slots.run(
            () => runner.run(envelope, running),
            () => governor.govern(),
            // The worker stops: a call still waiting for a slot has not started, and goes back to the queue.
            () => handBack(envelope, 'shutdown'),
          );
        }),
      );
      if (handedBack && !this.#stopping) this.#pauseFetching();
    } finally {
      governor.jobDone();
    }
  }
}
