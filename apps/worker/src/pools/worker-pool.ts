import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import {
  CallBatch,
  CallEnvelope,
  type CallProgress,
  CancelledError,
  envelopeForgery,
  ForgedCallError,
  ResourceLimitError,
  ConfigInvalidError,
  errorResult,
  keyCheck,
  ExpiredError,
  fleetKeys,
  type FleetError,
  isErrorCode,
  lazyChild,
  isRetryable,
  ProgressThrottle,
  laneOf,
  packQueueName,
  queueName,
  runExecutor,
  type Tier,
  type Tool,
  ToolNotFoundError,
  type ToolResult,
  type CallStatus,
  type AuditLogger,
  type RedisTarget,
  WorkerLostError,
} from '@forge-fleet/shared';
import { Catalog, CallStore, closeRedis, connectRedis, KeyChecks, openQueue, packOf, RedisAuditLogger, type RedisConnection, RedisRiskSignalQueue, ReplyPublisher } from '@forge-fleet/store';
import { type FleetMetrics, MeteredAuditLogger, type ToolTracer } from '@forge-fleet/telemetry';
import { type Job, type Queue, UnrecoverableError, Worker } from 'bullmq';
import type { Logger } from 'pino';

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
  /** The key that verifies the dispatchers' signatures on this queue's calls. */
  readonly callKey: Uint8Array;
  /** Largest result (bytes of JSON) a call may end with; larger ones end as RESOURCE_LIMIT. */
  readonly maxResultBytes: number;
  /** Shortest time between two progress reports of one call leaving this worker. @defaultValue 200 */
  readonly progressIntervalMs?: number | undefined;
  /** Counts outcomes (through the audit sink) and times runs. */
  readonly metrics?: FleetMetrics | undefined;
  /** Wraps each run in its `execute_tool` span; undefined while tracing is off (see ToolTracer.of). */
  readonly tracer?: ToolTracer | undefined;
  /** Told when the pool finds after start that it must not go on (its call key proved wrong); the process should stop and exit. */
  readonly onFatal?: ((error: unknown) => void) | undefined;
  readonly log: Logger;
}

/** How long a call-state step is retried through a Redis outage before the worker gives the call up (its lock has long expired by then: another worker answers it as lost). */
const OUTAGE_LIMIT_MS = 10 * 60 * 1000;

/** Runs at most `limit` tasks at once; the rest wait their turn in order. */
class Slots {
  #free: number;
  readonly #waiting: (() => void)[] = [];
  constructor(limit: number) {
    this.#free = limit;
  }
  /** Slots no task holds or waits for. */
  get spare(): number {
    return this.#free - this.#waiting.length;
  }
  async run<T>(task: () => Promise<T>, onSlot?: () => void): Promise<T> {
    if (this.#free > 0) this.#free--;
    else await new Promise<void>((resolve) => this.#waiting.push(resolve));
    onSlot?.();
    try {
      return await task();
    } finally {
      const next = this.#waiting.shift();
      if (next === undefined) this.#free++;
      else next();
    }
  }
}

/**
 * A call running in this worker, and the way to stop it: runExecutor hands
 * over its cancel function when the run begins (no AbortController and
 * listener of our own per call on the hot path). The first stop wins.
 */
class ActiveRun {
  #cancel: ((reason: unknown) => void) | undefined;
  /** Why it was stopped (a shutdown's WorkerLostError, a caller's cancellation), if it was. */
  stoppedFor: unknown;
  #stopped = false;

  attach(cancel: (reason: unknown) => void): void {
    this.#cancel = cancel;
    if (this.#stopped) cancel(this.stoppedFor);
  }

  stop(reason: unknown): void {
    if (this.#stopped) return;
    this.#stopped = true;
    this.stoppedFor = reason;
    this.#cancel?.(reason);
  }
}

/**
 * A pool of one tier (and, for host, one pool): takes calls from its queue,
 * runs them, stores each result and pushes it to the dispatchers waiting for it.
 */
export class WorkerPool {
  readonly id: string;
  /** Its tool pack's queue: only workers serving exactly these tools (and definitions) take calls from it. */
  readonly queue: string;
  /** The lane's queue name: what its calls' signing key derives from (and what error messages name). */
  readonly laneQueue: string;
  /** The key space of this pool's calls (records, reply lists, cancel channel): its Redis user may touch no other. */
  readonly lane: string;
  readonly #o: WorkerPoolOptions;
  readonly #tools: Map<string, Tool>;
  readonly #keys;
  #redis: RedisConnection | undefined;
  #subscriber: RedisConnection | undefined;
  #worker: Worker | undefined;
  #store: CallStore | undefined;
  #catalog: Catalog | undefined;
  #queue: Queue | undefined;
  #queueConnection: RedisConnection | undefined;
  #workerConnection: RedisConnection | undefined;
  #replies: ReplyPublisher | undefined;
  #audit: AuditLogger | undefined;
  #risk: RedisRiskSignalQueue | undefined;
  readonly #slots: Slots;
  #leaseTimer: NodeJS.Timeout | undefined;
  /** Calls running here, by id: each with the way to stop it. */
  readonly #active = new Map<string, ActiveRun>();
  /** Jobs being processed, and their calls that have not asked for a slot yet. */
  #activeJobs = 0;
  #unasked = 0;
  /** Moving average of calls per job, to size how many jobs fill the spare slots. */
  #callsPerJob = 1;
  #stopping = false;
  /** Set once the lane's published key check matched this worker's call key (see #verifyKey). */
  #keyVerified = false;
  #keyChecks: KeyChecks | undefined;

  constructor(options: WorkerPoolOptions) {
    this.#o = options;
    this.id = options.id ?? `${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;
    this.laneQueue = queueName(options.prefix, options.tier, options.pool);
    this.queue = packQueueName(this.laneQueue, packOf(options.tools.map((t) => t.definition), options.pack).id);
    this.#tools = new Map(options.tools.map((t) => [t.definition.name, t]));
    this.#keys = fleetKeys(options.prefix);
    this.lane = laneOf(options.tier, options.pool);
    // `concurrency` bounds calls, not jobs: a batch job's calls share these slots.
    this.#slots = new Slots(options.concurrency);
  }

  /**
   * Announces the tools, then starts taking calls.
   * @throws RegistryError when a live worker serves one of the tools with another definition.
   */
  async start(): Promise<void> {
    const o = this.#o;
    this.#redis = connectRedis(o.redis, 'command', o.log);
    this.#store = new CallStore(this.#redis, this.#keys, o.retentionMs);
    this.#catalog = new Catalog(this.#redis, this.#keys);
    this.#replies = new ReplyPublisher(this.#redis, this.#keys);
    const audit = new RedisAuditLogger(this.#redis, this.#keys);
    // Every outcome this worker decides is audited: outcomes are counted there (see MeteredAuditLogger).
    this.#audit = o.metrics === undefined ? audit : new MeteredAuditLogger(audit, o.metrics);
    this.#risk = new RedisRiskSignalQueue(this.#redis, this.#keys, (err) => o.log.error({ err }, 'risk signal write failed'));
    this.#keyChecks = new KeyChecks(this.#redis, this.#keys);
    // Before anything is announced: a worker whose key cannot verify its lane's calls must never take one.
    await this.#verifyKey(o.keyCheckWaitMs ?? 3000);
    const definitions = [...this.#tools.values()].map((t) => t.definition);
    await this.#catalog.announce(this.lane, this.id, definitions, o.leaseMs, { pack: o.pack });
    this.#leaseTimer = setInterval(() => {
      this.#catalog?.announce(this.lane, this.id, definitions, o.leaseMs, { pack: o.pack }).catch((err: unknown) => o.log.error({ err }, 'catalog lease renewal failed'));
      if (!this.#keyVerified) this.#verifyKey(0).catch((err: unknown) => this.#wrongKey(err));
    }, Math.max(100, Math.floor(o.leaseMs / 3)));

    // Cancellation is rare: one broadcast channel heard by every worker is enough.
    this.#subscriber = connectRedis(o.redis, 'blocking', o.log);
    await this.#subscriber.subscribe(this.#keys.cancelChannel(this.lane));
    this.#subscriber.on('message', (_channel: string, callId: string) => {
      this.#active.get(callId)?.stop('cancelled by its caller');
    });

    this.#worker = new Worker(this.queue, (job, _token, signal) => this.#process(job, signal), {
      connection: (this.#workerConnection = connectRedis(o.redis, 'blocking', o.log)),
      prefix: o.prefix,
      // Governed from here on (see #govern): a job is fetched only when a call slot is spare.
      concurrency: 1,
      lockDuration: o.lockDurationMs,
      // Check often, so a dead worker's call is found within about one lock duration.
      stalledInterval: Math.max(500, Math.floor(o.lockDurationMs / 3)),
      // Stalls are counted by the call record (see #process), never by BullMQ failing the job.
      maxStalledCount: 1000,
      autorun: true,
    });
    this.#worker.on('error', (err) => o.log.error({ err }, 'worker error'));
    await this.#worker.waitUntilReady();
    // Tell dispatchers now rather than at their next periodic catalog read.
    await this.#catalog.announce(this.lane, this.id, definitions, o.leaseMs, { notify: true, pack: o.pack });
    o.log.info({ queue: this.queue, tools: definitions.map((d) => d.name), workerId: this.id, concurrency: o.concurrency }, 'worker pool ready');
  }

  /**
   * Compares the key check the dispatchers publish for this lane with this
   * worker's call key. Waits up to `waitMs` for one to appear (asking the
   * dispatchers for it); with none published (no dispatcher has run yet), the
   * worker starts unverified and checks again on every lease renewal and
   * before each job, so it still never runs a call under a wrong key.
   * @throws ConfigInvalidError naming FORGE_CALL_KEY when the key is not this lane's.
   */
  async #verifyKey(waitMs: number): Promise<void> {
    const checks = this.#keyChecks!;
    const mine = keyCheck(this.#o.callKey);
    let published = await checks.read(this.lane);
    if (published === undefined && waitMs > 0) {
      await checks.request(this.lane, this.id);
      const until = Date.now() + waitMs;
      while (published === undefined && Date.now() < until) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        published = await checks.read(this.lane);
      }
      if (published === undefined) this.#o.log.warn({ lane: this.lane }, 'no dispatcher has published this lane\'s key check yet; FORGE_CALL_KEY is checked again before the first call runs');
    }
    if (published === undefined) return;
    if (published !== mine) {
      const pool = this.#o.pool === undefined ? '' : ` --pool ${this.#o.pool}`;
      throw new ConfigInvalidError('FORGE_CALL_KEY', [
        `it is not the key of the ${this.lane} queue (--tier ${this.#o.tier}${pool}): the dispatchers sign this queue's calls with another key, so every call would be refused as forged`,
        `make the right one with \`forge keys worker-key --secret <the dispatchers' signing.secret> --tier ${this.#o.tier}${pool}\`, or start the worker with the --tier/--pool its key was made for`,
      ]);
    }
    this.#keyVerified = true;
  }

  /** A key found wrong after start (no dispatcher had published a check then): stop taking calls and exit. */
  #wrongKey(err: unknown): void {
    if (this.#stopping) return;
    this.#o.log.fatal({ err }, 'this worker\'s FORGE_CALL_KEY is not its lane\'s; stopping');
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

  /** Whether it takes calls: started, not stopping, its queue connection up. */
  get ready(): boolean {
    return this.#worker !== undefined && !this.#stopping && this.#workerConnection?.status === 'ready';
  }

  /** Calls running now. */
  get active(): number {
    return this.#active.size;
  }

  /**
   * Stops taking calls, lets active ones finish for the grace period, then
   * aborts the rest (retryable ones go back to the queue; others end with
   * WORKER_LOST), gives up the catalog leases and closes.
   */
  async stop(): Promise<void> {
    if (this.#stopping) return;
    this.#stopping = true;
    const o = this.#o;
    clearInterval(this.#leaseTimer);
    await this.#catalog?.withdraw(this.lane, this.id, [...this.#tools.values()].map((t) => t.definition), o.pack).catch(() => undefined);
    const closing = this.#worker?.close();
    const grace = setTimeout(() => {
      if (this.#active.size > 0) o.log.warn({ active: this.#active.size }, 'grace period over: aborting active calls');
      for (const run of this.#active.values()) run.stop(new WorkerLostError('call', 'shutdown'));
    }, o.shutdownGraceMs);
    await closing;
    clearTimeout(grace);
    if (this.#workerConnection) await closeRedis(this.#workerConnection);
    await this.#queue?.close();
    if (this.#queueConnection !== undefined) await closeRedis(this.#queueConnection);
    if (this.#subscriber) await closeRedis(this.#subscriber);
    if (this.#redis) await closeRedis(this.#redis);
    o.log.info('worker pool stopped');
  }

  /** Ends the call; its submitter's reply goes out in the same step, any other waiting dispatchers' after. */
  /**
   * Ends the call; its submitter's reply goes out in the same step, any other
   * waiting dispatchers' after. A result over the size limit ends the call
   * with RESOURCE_LIMIT instead: stored and pushed, it would burden Redis and
   * every dispatcher waiting for it. The outcome is audited (not awaited: one
   * XADD on the auto-pipelined connection).
   */
  async #finish(envelope: CallEnvelope, status: CallStatus, result: ToolResult, onlyFrom?: CallStatus): Promise<void> {
    const { id } = envelope.call;
    let json = JSON.stringify(result);
    if (json.length > this.#o.maxResultBytes && Buffer.byteLength(json) > this.#o.maxResultBytes) {
      const limit = new ResourceLimitError(envelope.call.name, 'output', `the result is ${Buffer.byteLength(json)} bytes of JSON, the limit is ${this.#o.maxResultBytes} (FORGE_MAX_RESULT_BYTES)`);
      status = 'failed';
      result = errorResult(envelope.call, limit);
      json = JSON.stringify(result);
    }
    const finishOptions = onlyFrom === undefined ? { replyTo: envelope.replyTo, resultJson: json } : { onlyFrom, replyTo: envelope.replyTo, resultJson: json };
    const targets = await this.#durably('finish', id, () => this.#store!.finish(this.lane, id, status, result, finishOptions));
    if (targets === undefined) return;
    if (status === 'completed' || status === 'failed') {
      const audited = this.#audit!.record({
        at: new Date().toISOString(),
        decision: status,
        callId: id,
        tool: envelope.call.name,
        tier: envelope.tier,
        scopeAtDispatch: this.queue,
        ...(result.error === undefined ? {} : { code: result.error.code }),
        ...(envelope.caller === undefined ? {} : { caller: envelope.caller }),
      });
      Promise.resolve(audited).catch((err: unknown) => this.#o.log.error({ err, callId: id }, 'could not audit a call outcome'));
    }
    if (targets.length > 0) await this.#replies!.publish(this.lane, targets, { v: 1, id, status, result });
  }

  /**
   * Runs a call-state step until Redis takes it. The step's outcome is what
   * the call's one final answer depends on (its result is only in this
   * process's memory until `finish` lands), so a Redis outage must delay it,
   * never drop it: the connection fails a command after a few reconnection
   * attempts, and this tries again with backoff (100 ms doubling to 2 s) for
   * up to {@link OUTAGE_LIMIT_MS}, logging each failure. A step that a
   * restarted Redis no longer needs (the call ended meanwhile) answers as such
   * from its script.
   */
  async #durably<T>(step: string, callId: string, op: () => Promise<T>): Promise<T> {
    const began = Date.now();
    for (let attempt = 0; ; attempt++) {
      try {
        return await op();
      } catch (err) {
        if (Date.now() - began > OUTAGE_LIMIT_MS) throw err;
        this.#o.log.warn({ err, callId, step, attempt }, 'Redis did not take a call step; trying again');
        await new Promise((resolve) => setTimeout(resolve, Math.min(2000, 100 * 2 ** attempt)));
      }
    }
  }

  /**
   * Passes a progress report on to the dispatchers waiting for the call (and
   * keeps it on the record), while this worker still runs it. Best effort: a
   * report that cannot be written is logged, never fails the call.
   */
  async #report(envelope: CallEnvelope, progress: CallProgress, log: Pick<Logger, 'warn'>): Promise<void> {
    const { id } = envelope.call;
    try {
      const targets = await this.#store!.progress(this.lane, id, this.id, progress);
      if (targets !== undefined && targets.length > 0) await this.#replies!.publish(this.lane, targets, { v: 1, id, progress });
    } catch (err) {
      log.warn({ err }, 'could not pass on a progress report');
    }
  }

  async #fail(envelope: CallEnvelope, error: FleetError, onlyFrom?: CallStatus): Promise<void> {
    await this.#finish(envelope, 'failed', errorResult(envelope.call, error), onlyFrom);
  }

  /** A job carries one call, or a batch of calls for this queue; each runs on its own. */
  async #process(job: Job, bullSignal?: AbortSignal): Promise<void> {
    // Decide the shape first: a failed parse builds an error object, which a single-call job should not pay for.
    const isBatch = typeof job.data === 'object' && job.data !== null && 'batch' in job.data;
    const parsed = isBatch ? CallBatch.safeParse(job.data) : CallEnvelope.safeParse(job.data);
    const envelopes: CallEnvelope[] = !parsed.success ? [] : 'batch' in parsed.data ? parsed.data.batch : [parsed.data];
    if (envelopes.length === 0) {
      this.#o.log.error({ jobId: job.id, name: job.name }, 'job is neither a call envelope nor a batch; dropped');
      throw new UnrecoverableError('invalid call envelope');
    }
    if (!this.#keyVerified) {
      try {
        await this.#verifyKey(0);
      } catch (err) {
        // Not ours to run: hand the calls back to the queue for the pack's other workers, then stop.
        await this.#retryQueue().add(job.name, job.data, { removeOnComplete: true, removeOnFail: { age: 24 * 3600 } });
        this.#wrongKey(err);
        return;
      }
    }
    // The job's signal (BullMQ's cancelJob) reaches its calls through one listener, not one per call:
    // adding and removing an EventTarget listener per call was measurable on the hot path.
    const running = new Set<ActiveRun>();
    bullSignal?.addEventListener('abort', () => {
      for (const run of running) run.stop('cancelled by its caller');
    }, { once: true });
    this.#activeJobs++;
    this.#unasked += envelopes.length;
    this.#callsPerJob = 0.8 * this.#callsPerJob + 0.2 * envelopes.length;
    this.#govern();
    try {
      await Promise.all(
        envelopes.map((envelope) => {
          this.#unasked--;
          return this.#slots.run(
            () => this.#runCall(envelope, running),
            () => this.#govern(),
          );
        }),
      );
    } finally {
      this.#activeJobs--;
      this.#govern();
    }
  }

  /**
   * A forged call ends as FORGED_CALL if its record is still queued (a real
   * call's job may have been tampered with; a running or finished call is left
   * alone), and leaves an audit entry and a risk signal either way.
   */
  async #refuseForged(envelope: CallEnvelope, reason: string): Promise<void> {
    const { call } = envelope;
    const at = new Date().toISOString();
    const caller = envelope.caller === undefined ? {} : { caller: envelope.caller };
    this.#risk!.push({ kind: 'forged_call', at, callId: call.id, tool: call.name, scope: this.queue, reason, ...caller });
    await Promise.all([
      this.#audit!.record({ at, callId: call.id, tool: call.name, errorCategory: 'forged_call', scopeAtListing: null, scopeAtDispatch: this.queue, reason, ...caller }),
      this.#fail(envelope, new ForgedCallError(call.name, reason), 'queued'),
    ]).catch((err: unknown) => this.#o.log.error({ err, callId: call.id }, 'could not record a forged call'));
  }

  /**
   * BullMQ fetches jobs while fewer than `concurrency` are active, and a job
   * may carry a batch of calls: left alone, a busy worker would hoard jobs
   * whose calls only wait for its slots while other workers idle. So the job
   * limit follows the call slots: as many more jobs as the spare slots would
   * fill at the recent calls-per-job, and at least one while any slot is
   * spare. (One job at a time would starve a worker fed many small jobs.)
   */
  #govern(): void {
    if (this.#worker === undefined) return;
    // Idle, fetch one job and start it: BullMQ fetches up to `concurrency` jobs before it runs the first,
    // and an idle worker would otherwise make an empty second fetch before starting a lone call.
    if (this.#activeJobs === 0) {
      this.#worker.concurrency = 1;
      return;
    }
    const spare = this.#slots.spare - this.#unasked;
    const more = spare > 0 ? Math.max(1, Math.floor(spare / this.#callsPerJob)) : 0;
    this.#worker.concurrency = this.#activeJobs + more;
  }

  /** Runs one call of a job; `jobCalls` holds the job's running calls, for the job's cancellation. */
  async #runCall(envelope: CallEnvelope, jobCalls: Set<ActiveRun>): Promise<void> {
    const { call } = envelope;
    const log = lazyChild(this.#o.log, { callId: call.id, tool: call.name, tier: this.#o.tier });
    // Before anything else: a call this queue's key does not vouch for never runs.
    const forgery = envelopeForgery(envelope, this.#o.callKey, { tier: this.#o.tier, pool: this.#o.pool });
    if (forgery !== undefined) {
      await this.#refuseForged(envelope, forgery);
      log.warn({ reason: forgery, caller: envelope.caller }, 'forged call refused');
      return;
    }
    const tool = this.#tools.get(call.name);
    if (tool?.executor === undefined) {
      log.error('call routed to a worker that does not serve the tool');
      await this.#fail(envelope, new ToolNotFoundError(call.name, { known: [...this.#tools.keys()] }));
      return;
    }
    const { definition, executor } = tool;
    // A start that cannot reach Redis is tried again: failing the job would leave its call queued for ever.
    // (A start that did land but lost its reply is seen on the next try as a redelivery: never a second run.)
    const { outcome, starts } = await this.#durably('start', call.id, () => this.#store!.start(this.lane, call.id, this.id, envelope.token));
    switch (outcome) {
      case 'missing':
      case 'superseded':
      case 'final':
      case 'not_approved':
        log.debug({ outcome }, 'call skipped');
        return;
      case 'cancelled':
        await this.#finish(envelope, 'cancelled', errorResult(call, new CancelledError(call.name, 'cancelled before it started')));
        log.info('call cancelled before start');
        return;
      case 'expired':
        await this.#fail(envelope, new ExpiredError(call.name, envelope.deadline ?? 0), 'queued');
        log.info('call expired in the queue');
        return;
      case 'redelivered':
        // Its lock lapsed (this worker was cut off from Redis) and the job came back here, where the first run
        // still goes on: that run will answer; ending the call now would report a live run as lost.
        if (this.#active.has(call.id)) {
          log.info({ starts }, 'call redelivered to the worker still running it; the running one answers');
          return;
        }
        if (!definition.retryable) {
          await this.#fail(envelope, new WorkerLostError(call.name, 'lock_expired', { detail: `during run ${starts - 1}` }));
          log.warn({ starts }, 'call lost with its worker; not run again');
          return;
        }
        if (starts > this.#o.retryAttempts) {
          await this.#fail(envelope, new WorkerLostError(call.name, 'retries_exhausted', { attempts: starts - 1, detail: 'its worker stopped answering (lock expired)' }));
          log.warn({ starts }, 'call lost with its worker; retry limit reached');
          return;
        }
        log.warn({ starts }, 'call lost with its worker; running it again (retryable)');
        break;
      case 'started':
        break;
    }

    const active = new ActiveRun();
    jobCalls.add(active);
    this.#active.set(call.id, active);
    log.info({ attempt: starts }, 'call started');
    const startedAt = Date.now();
    const began = performance.now();
    // Progress goes out in order and before the result: the last report is awaited before the call ends.
    // Made on the first report: most tools never report, and this is the hot path.
    let reporting: Promise<void> | undefined;
    let throttle: ProgressThrottle | undefined;
    const onProgress = (progress: CallProgress): void => {
      throttle ??= new ProgressThrottle(this.#o.progressIntervalMs ?? 200, (next) => {
        reporting = (reporting ?? Promise.resolve()).then(() => this.#report(envelope, next, log));
      });
      throttle.push(progress);
    };
    let result: ToolResult;
    try {
      const run = () => runExecutor(executor, definition, call, { onCancellable: (cancel) => active.attach(cancel), attempt: starts, onProgress });
      result = this.#o.tracer === undefined ? await run() : await this.#o.tracer.execute(call, this.#o.tier, envelope.trace, run);
    } finally {
      throttle?.close();
      this.#active.delete(call.id);
      jobCalls.delete(active);
    }
    if (reporting !== undefined) await reporting;
    const elapsed = performance.now() - began;
    const ms = Math.round(elapsed);
    this.#o.metrics?.observeRun(call.name, this.#o.tier, { queueWaitMs: startedAt - envelope.enqueuedAt, executionMs: elapsed, endToEndMs: startedAt + elapsed - envelope.enqueuedAt });

    const lostToShutdown = active.stoppedFor instanceof WorkerLostError;
    const code = result.error?.code;
    if (lostToShutdown || (result.isError && code !== 'CANCELLED')) {
      const mayRetry = definition.retryable && (lostToShutdown || (code !== undefined && isErrorCode(code) && isRetryable(code))) && starts < this.#o.retryAttempts;
      if (mayRetry) {
        // Retries are jobs of their own, delayed with exponential backoff (a shutdown hands the call back at once).
        await this.#durably('requeue', call.id, () => this.#store!.requeue(this.lane, call.id));
        const delay = lostToShutdown ? 0 : this.#o.retryBackoffMs * 2 ** (starts - 1);
        try {
          await this.#retryQueue().add(call.name, envelope, { delay, removeOnComplete: true, removeOnFail: { age: 24 * 3600 } });
          log.warn({ ms, code, attempt: starts, delay }, 'call failed; retrying');
          return;
        } catch (err) {
          // No retry job, no retry: end the call with what its last run gave rather than leave it queued forever.
          log.error({ err }, 'could not enqueue the retry; ending the call with its last result');
          await this.#finish(envelope, 'failed', result, 'queued');
          return;
        }
      }
      if (lostToShutdown) {
        const lost = definition.retryable
          ? new WorkerLostError(call.name, 'retries_exhausted', { attempts: starts, detail: 'the worker shut down before the call finished' })
          : new WorkerLostError(call.name, 'shutdown');
        await this.#fail(envelope, lost);
        log.warn({ ms }, 'call aborted by shutdown');
        return;
      }
    }
    const status: CallStatus = code === 'CANCELLED' ? 'cancelled' : result.isError ? 'failed' : 'completed';
    await this.#finish(envelope, status, result);
    log.info({ ms, status, code }, 'call finished');
  }
}
