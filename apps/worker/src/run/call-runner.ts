import { randomUUID } from 'node:crypto';
import {
  type AuditLogger,
  type CallEnvelope,
  type CallProgress,
  type CallStatus,
  CancelledError,
  envelopeForgery,
  errorResult,
  ExpiredError,
  ForgedCallError,
  lazyChild,
  ProgressThrottle,
  runExecutor,
  type Tier,
  type Tool,
  NoWorkerError,
  type ToolResult,
  UnavailableError,
  WorkerLostError,
} from '@forge-fleet/shared';
import type { CallStore, RedisRiskSignalQueue, SessionPlace } from '@forge-fleet/store';
import type { FleetMetrics, ToolTracer } from '@forge-fleet/telemetry';
import type { Queue } from 'bullmq';
import type { Logger } from 'pino';
import type { CallAnswers } from '../answer/call-answers.js';
import { executorForCaller } from '../tools/caller-executor.js';
import { callerSessionOf } from '../tools/caller-session.js';
import { type ReservedRun, type SlotReserver, slotReserverOf } from '../tools/slot-reserve.js';
import { ActiveRun } from './active-run.js';
import { durableStep } from './durable-step.js';
import { afterLostRun, afterRun, mayRun, type RunFacts } from './retry-policy.js';

/**
 * How long past its signature's end a lane keeps an envelope's execution
 * record: a worker whose clock runs behind Redis's still finds the record for
 * as long as it would accept the envelope.
 */
const EXECUTIONS_CLOCK_SKEW_MS = 5 * 60_000;

/**
 * How many times a call may be sent on to the worker holding its caller's session: the holder can change while the
 * call travels (a session given up, a hold that lapsed), and a call must not travel for ever.
 */
const MAX_SEND_ON = 2;

/** How often a call waiting on slots that are all taken looks for another worker of its pack to go to. */
const WAITING_LOOK_MS = 1000;

/** Why a wait for a slot was stopped: the call goes to another worker of the pack (see CallRunner's #reserve). */
const MOVE_ELSEWHERE = Symbol('move elsewhere');

/**
 * A failure may pass (its code says so), but sending the call again is safe
 * only for a tool flagged retryable: otherwise the caller is told
 * `retryable: false`, so it does not send a second run of a tool that must
 * not run twice.
 */
export function retryableOnlyIfSafe(result: ToolResult, toolRetryable: boolean): ToolResult {
  return result.error?.retryable === true && !toolRetryable ? { ...result, error: { ...result.error, retryable: false } } : result;
}

/**
 * Where callers' sessions with `perCaller` MCP servers are held, across the
 * workers of a pack (see CallerSessions in packages/store).
 */
export interface SessionRouting {
  /** Where `caller`'s session with `server` is held; claimed for this worker when no one holds it and `claim` is set. */
  place(server: string, caller: string, claim: boolean): Promise<SessionPlace>;
  /** Gives up this worker's hold on `caller`'s session with `server` (it claimed it, then handed the call back). */
  release(server: string, caller: string): Promise<void>;
  /** A worker's own queue, to send a call on to it. */
  queue(name: string): Queue;
}

/** What a call runner works with. */
export interface CallRunnerDeps {
  readonly lane: string;
  /** The queue the calls come from (the pack's), named in audit entries and risk signals. */
  readonly queue: string;
  readonly tier: Tier;
  readonly pool: string | undefined;
  readonly workerId: string;
  /** The tools this worker serves, by name. */
  readonly tools: ReadonlyMap<string, Tool>;
  /** The key that verifies the dispatchers' signatures on this lane's calls. */
  readonly callKey: Uint8Array;
  readonly store: CallStore;
  readonly answers: CallAnswers;
  readonly audit: AuditLogger;
  readonly risk: RedisRiskSignalQueue;
  /** The queue retries go back to (the pack's own), opened on first use. */
  readonly retryQueue: () => Queue;
  readonly retryAttempts: number;
  readonly retryBackoffMs: number;
  /**
   * Whether another live worker serves this worker's pack: then a call whose tool has no free slot here goes back
   * to the queue for it, rather than wait here (see run).
   */
  readonly othersServe?: () => Promise<boolean>;
  /** Told when a call went back to the queue for want of a slot: the worker takes no job for a moment, so that another does. */
  readonly onHandedBack?: () => void;
  /** Where callers' sessions are held, when other workers may hold them: undefined for a worker whose tools keep none. */
  readonly sessions?: SessionRouting | undefined;
  /** Shortest time between two progress reports of one call leaving this worker. */
  readonly progressIntervalMs: number;
  readonly metrics?: FleetMetrics | undefined;
  readonly tracer?: ToolTracer | undefined;
  readonly log: Logger;
}

/**
 * Runs one call taken from the queue, from the signature check to its end:
 * refuses what no dispatcher signed, takes the call on its record (the start
 * step is what keeps at-most-once and cancel-before-start), runs the tool with
 * cancellation and progress, and then retries it or ends it (see
 * retry-policy.ts). The calls running here are kept by id, for cancellation
 * and shutdown.
 */
export class CallRunner {
  readonly #d: CallRunnerDeps;
  /** Calls running here, by id: each with the way to stop it. */
  readonly active = new Map<string, ActiveRun>();
  /** Calls waiting for a slot of their tool's (see slot-reserve.ts), not started yet: each with the way to stop the wait. */
  readonly #reserving = new Map<string, ActiveRun>();
  /** Shutting down: a call still waiting for a slot goes back to the queue. */
  #handingBack = false;

  constructor(deps: CallRunnerDeps) {
    this.#d = deps;
  }

  /** Stops a running call (a caller's cancellation, a shutdown's WorkerLostError), or a call's wait for a slot. */
  stop(callId: string, reason: unknown): void {
    this.active.get(callId)?.stop(reason);
    // A cancelled wait goes on to the start step, which finds the call cancelled and says so.
    this.#reserving.get(callId)?.stop(reason);
  }

  /**
   * A shutdown: every call still waiting for a slot, and every one that would
   * wait from now on, goes back to the queue for another worker. None of them
   * has started, so none is lost with this worker.
   */
  handBackWaiting(): void {
    this.#handingBack = true;
    for (const waiting of this.#reserving.values()) waiting.stop(new WorkerLostError('call', 'shutdown'));
  }

  /**
   * Runs one call of a job; `jobCalls` holds the job's running calls, for the job's cancellation. A call whose
   * tool's slots are all taken here (an MCP server's instances all busy, and no more to start) goes back to the
   * head of the queue when another live worker serves the pack, for a worker with a free one, instead of waiting
   * here; this worker then takes no job for a moment, or it would take the call straight back. The only worker
   * of a pack keeps such a call until a slot frees.
   *
   * A call to a server that keeps a session per caller goes to the worker holding its caller's session: one that
   * another worker holds is sent on to that worker's own queue. A call that came from there (`sentOn`: the times it
   * was sent on) runs here whatever the slots, claiming the session if no one holds it; if another worker has come
   * to hold it meanwhile, it goes on there, unless it was sent on {@link MAX_SEND_ON} times already.
   */
  async run(envelope: CallEnvelope, jobCalls: Set<ActiveRun>, sentOn = 0): Promise<void> {
    const d = this.#d;
    const { call } = envelope;
    const log = lazyChild(d.log, { callId: call.id, tool: call.name, tier: d.tier });
    // Before anything else: a call this lane's key does not vouch for never runs.
    const forgery = envelopeForgery(envelope, d.callKey, { tier: d.tier, pool: d.pool });
    if (forgery !== undefined) {
      // A signature ends with its call's deadline: one that held until then is a genuine call that waited too long.
      if (envelope.deadline !== undefined && envelopeForgery(envelope, d.callKey, { tier: d.tier, pool: d.pool }, envelope.deadline) === undefined) {
        await d.answers.fail(envelope, new ExpiredError(call.name, envelope.deadline), 'queued');
        log.info('call expired in the queue');
        return;
      }
      await this.#refuseForged(envelope, forgery);
      log.warn({ reason: forgery, caller: envelope.caller }, 'forged call refused');
      return;
    }
    const tool = d.tools.get(call.name);
    if (tool?.executor === undefined) {
      // A pack's jobs carry only its tools, but a call sent on to a worker's own queue goes to its generation of now,
      // and an MCP server may have dropped the tool from its list since (one caller's instance had listed it): the
      // call has not run, and no worker serves it here. (A job put on a queue by hand ends so too.)
      log.warn('call reached a worker that does not serve its tool');
      await d.answers.fail(envelope, new NoWorkerError(call.name, d.queue, { lane: { tier: d.tier, pool: d.pool }, ended: true, reason: 'the worker it reached does not serve it (any more): an MCP server no longer lists it' }));
      return;
    }
    const reserver = slotReserverOf(tool.executor);
    let reserved: ReservedRun | undefined;
    if (reserver !== undefined) {
      // A caller's session that another worker holds: the call goes there (see #placeSession).
      const session = this.#sessionToPlace(envelope, tool);
      const placed = session === undefined ? undefined : await this.#placeSession(envelope, session, reserver, sentOn, log);
      if (placed === 'sent on') return;
      // Not awaited unless the slots are full: the calls of a batch each see the slots the ones before them reserved.
      const elsewhere = sentOn === 0 && reserver.full(envelope.caller) && (await d.othersServe?.()) === true;
      // Claimed here, but the slots filled meanwhile: the worker that takes the call claims the session instead.
      if (elsewhere && placed === 'claimed') await d.sessions!.release(session!.server, session!.caller).catch(() => undefined);
      // A call that waits here may still move: a worker with room may come (see #reserve). Not one sent on here.
      const moves = sentOn === 0 ? { release: placed === 'claimed' ? () => d.sessions!.release(session!.server, session!.caller) : undefined } : undefined;
      const got = elsewhere ? await this.handBack(envelope, 'its tool has no free slot here', log) : await this.#reserve(envelope, reserver, log, moves);
      if (elsewhere && got === 'handed back') d.onHandedBack?.();
      if (got === 'handed back' || got === 'already waiting') return;
      if (got instanceof UnavailableError) {
        // What runs the tool is down (an MCP server that does not start, or crash-looped): the call never started,
        // and ends as a call no worker can run does, not as a run that failed.
        const reason = typeof got.details.reason === 'string' ? got.details.reason : got.message;
        await d.answers.fail(envelope, new NoWorkerError(call.name, d.queue, { lane: { tier: d.tier, pool: d.pool }, ended: true, reason }), 'queued');
        log.warn({ reason: got.message }, 'call not started: what runs its tool is down');
        return;
      }
      reserved = got;
    }
    try {
      await this.#startAndRun(envelope, tool, reserved, jobCalls, log);
    } finally {
      reserved?.release();
    }
  }

  /**
   * Waits for a slot before the start step (see slot-reserve.ts). A wait that
   * is stopped by a cancel leaves the call to the start step, which says what
   * became of it; one stopped by a shutdown hands the call back to the queue;
   * one that fails because what runs the tool is down gives that error.
   */
  async #reserve(
    envelope: CallEnvelope,
    { reserve, full }: SlotReserver,
    log: Pick<Logger, 'info' | 'warn' | 'error'>,
    moves?: { readonly release: (() => Promise<void>) | undefined },
  ): Promise<ReservedRun | UnavailableError | 'handed back' | 'already waiting' | undefined> {
    const d = this.#d;
    const { call } = envelope;
    // A job that came back while its first copy still waits here (its lock lapsed): that copy goes on with the call.
    if (this.#reserving.has(call.id)) {
      log.info('call redelivered while it waits for a slot here; the waiting one goes on');
      return 'already waiting';
    }
    const waiting = new ActiveRun();
    this.#reserving.set(call.id, waiting);
    // While it waits on slots that are all taken, it looks again now and then for another live worker of the pack
    // (one that joined, or came back): there it need not wait for a call here to end, or a session to be reaped.
    let looking = false;
    // (Only for a call that will wait: most get their slot at once, and a timer each would be waste on the hot path.)
    const look =
      moves === undefined || d.othersServe === undefined || !full(envelope.caller)
        ? undefined
        : setInterval(() => {
            if (looking || !full(envelope.caller, true)) return;
            looking = true;
            void d.othersServe!()
              .then((others) => {
                if (others && full(envelope.caller, true)) waiting.stop(MOVE_ELSEWHERE);
              })
              .finally(() => (looking = false));
          }, WAITING_LOOK_MS);
    try {
      const slot = reserve(envelope.caller, (cancel) => waiting.attach(cancel));
      if (this.#handingBack) waiting.stop(new WorkerLostError('call', 'shutdown'));
      return await slot;
    } catch (err) {
      if (waiting.stoppedFor !== MOVE_ELSEWHERE && !(waiting.stoppedFor instanceof WorkerLostError)) return err instanceof UnavailableError ? err : undefined;
    } finally {
      clearInterval(look);
      this.#reserving.delete(call.id);
    }
    if (waiting.stoppedFor !== MOVE_ELSEWHERE) return this.handBack(envelope, 'shutdown', log);
    // The caller's session it claimed goes with it: the worker that takes the call claims it.
    await moves?.release?.().catch(() => undefined);
    const moved = await this.handBack(envelope, 'another worker serves its tool now, and its slots here are all taken', log);
    if (moved === 'handed back') d.onHandedBack?.();
    return moved;
  }

  /**
   * The session a call must find its holder for: of a tool that keeps one per caller, on a worker that shares its
   * pack with others (`sessions`), for a caller with no session here. `undefined` otherwise: the call is this
   * worker's to run.
   */
  #sessionToPlace(envelope: CallEnvelope, tool: Tool): { readonly server: string; readonly caller: string } | undefined {
    if (this.#d.sessions === undefined) return undefined;
    const source = callerSessionOf(tool.executor);
    // Anonymous callers share the session named for no one (see McpToolExecutor).
    const caller = envelope.caller ?? '';
    return source === undefined || source.holds(caller) ? undefined : { server: source.server, caller };
  }

  /**
   * Finds who holds the caller's session: another worker gets the call (`sent on`); no one, and this worker claims
   * it (`claimed`), unless its slots are full and another worker serves the pack (that one claims it when it takes
   * the call). A call sent on here always claims a session no one holds. A failed read or send says here: the call
   * then runs in a session of this worker's, as on a worker of its own.
   */
  async #placeSession(envelope: CallEnvelope, session: { readonly server: string; readonly caller: string }, reserver: SlotReserver, sentOn: number, log: Pick<Logger, 'info' | 'warn' | 'error'>): Promise<'sent on' | 'claimed' | undefined> {
    const d = this.#d;
    const mayGo = sentOn === 0 && reserver.full(envelope.caller) && (await d.othersServe?.()) === true;
    let place: SessionPlace;
    try {
      place = await d.sessions!.place(session.server, session.caller, !mayGo);
    } catch (err) {
      log.warn({ err, server: session.server }, "could not read where the caller's session is held; the call runs here");
      return undefined;
    }
    if (place === undefined) return undefined;
    if (place.here) return 'claimed';
    if (sentOn >= MAX_SEND_ON) {
      log.warn({ to: place.queue, sentOn }, "call sent on as often as it may; it runs here, outside its caller's session");
      return undefined;
    }
    return this.#sendOn(envelope, place.queue, sentOn + 1, log);
  }

  /**
   * A call that has not started goes to the worker holding its caller's session, as a job of its own on that
   * worker's own queue; `undefined` when that fails, and the call then runs here.
   */
  async #sendOn(envelope: CallEnvelope, queue: string, hops: number, log: Pick<Logger, 'info' | 'warn' | 'error'>): Promise<'sent on' | undefined> {
    const { call } = envelope;
    try {
      // The job's id counts the hops, which the receiving worker reads (WorkerPool's own queue).
      const jobId = `s${hops}-${envelope.token ?? call.id}-${randomUUID()}`;
      await durableStep('send on', call.id, () => this.#d.sessions!.queue(queue).add(call.name, envelope, { jobId, removeOnComplete: true, removeOnFail: { age: 24 * 3600 } }), log);
      log.info({ to: queue }, "call sent on to the worker holding its caller's session");
      return 'sent on';
    } catch (err) {
      log.error({ err }, "could not send the call on to the worker holding its caller's session; running it here");
      return undefined;
    }
  }

  /**
   * A call that has not started goes back to the pack's queue, as a job of its own (as a retry does); `undefined`
   * when that fails, and the call then waits for its slot here.
   */
  async handBack(envelope: CallEnvelope, why: string, log: Pick<Logger, 'info' | 'warn' | 'error'> = this.#d.log): Promise<'handed back' | undefined> {
    const d = this.#d;
    const { call } = envelope;
    // A job id of this hand-back's own: an add that landed but lost its answer is not added twice when sent again, and
    // a call handed back a second time (it came back here) is not taken for the job it came in, which is still held.
    // At the head of the queue: it was taken before the calls waiting there.
    try {
      const jobId = `h-${envelope.token ?? call.id}-${randomUUID()}`;
      await durableStep('hand back', call.id, () => d.retryQueue().add(call.name, envelope, { jobId, lifo: true, removeOnComplete: true, removeOnFail: { age: 24 * 3600 } }), log);
      log.info({ why }, 'call handed back to the queue before it started');
      return 'handed back';
    } catch (err) {
      // Not handed back: it runs here, within the shutdown's grace period, as a call taken before the shutdown does.
      log.error({ err }, 'could not hand the call back to the queue; running it here');
      return undefined;
    }
  }

  /** The start step and, if it says run, the run (see run). */
  async #startAndRun(envelope: CallEnvelope, tool: Tool, reserved: ReservedRun | undefined, jobCalls: Set<ActiveRun>, log: Pick<Logger, 'info' | 'warn' | 'error' | 'debug'>): Promise<void> {
    const d = this.#d;
    const { call } = envelope;
    const { definition } = tool;
    // A start that cannot reach Redis is tried again: failing the job would leave its call queued for ever.
    // (A start that did land but lost its reply is seen on the next try as a redelivery: never a second run.)
    // The start also counts this run on the lane's execution record (the replay barrier, see mayRun); envelopeForgery
    // vouched for the signature just now, so there is one. The run's id is fixed here: a resent start counts it once.
    const claim = { mac: envelope.sig!.mac, runId: `${d.workerId}:${randomUUID()}`, keepUntil: envelope.sig!.validUntil + EXECUTIONS_CLOCK_SKEW_MS };
    const { outcome, starts, runs } = await durableStep('start', call.id, () => d.store.start(d.lane, call.id, d.workerId, envelope.token, claim), log);
    const facts: RunFacts = { tool: call.name, retryable: definition.retryable, starts, attempts: d.retryAttempts, backoffMs: d.retryBackoffMs };
    switch (outcome) {
      case 'missing':
      case 'superseded':
      case 'final':
      case 'not_approved':
        log.debug({ outcome }, 'call skipped');
        return;
      case 'cancelled':
        await d.answers.finish(envelope, 'cancelled', errorResult(call, new CancelledError(call.name, 'cancelled before it started')));
        log.info('call cancelled before start');
        return;
      case 'expired':
        await d.answers.fail(envelope, new ExpiredError(call.name, envelope.deadline ?? 0), 'queued');
        log.info('call expired in the queue');
        return;
      case 'redelivered': {
        // Its lock lapsed (this worker was cut off from Redis) and the job came back here, where the first run
        // still goes on: that run will answer; ending the call now would report a live run as lost.
        if (this.active.has(call.id)) {
          log.info({ starts }, 'call redelivered to the worker still running it; the running one answers');
          return;
        }
        const next = afterLostRun(facts);
        if (next.then === 'lost') {
          await d.answers.finish(envelope, 'failed', retryableOnlyIfSafe(errorResult(call, next.error), definition.retryable));
          log.warn({ starts, reason: next.error.reason }, 'call lost with its worker; not run again');
          return;
        }
        log.warn({ starts }, 'call lost with its worker; running it again (retryable)');
        break;
      }
      case 'started':
        break;
    }
    // The record said run; the lane's own execution record has the last word.
    if (!mayRun(facts, runs)) {
      const reason = `its envelope has already run ${runs - 1} time${runs === 2 ? '' : 's'} (a replayed job)`;
      await this.#refuseForged(envelope, reason, 'running');
      log.warn({ reason, caller: envelope.caller }, 'replayed call refused');
      return;
    }
    await this.#execute(envelope, tool, reserved, facts, jobCalls, log);
  }

  async #execute(envelope: CallEnvelope, { definition, executor }: Tool, reserved: ReservedRun | undefined, facts: RunFacts, jobCalls: Set<ActiveRun>, log: Pick<Logger, 'info' | 'warn' | 'error'>): Promise<void> {
    const d = this.#d;
    const { call } = envelope;
    const { starts } = facts;
    const active = new ActiveRun();
    jobCalls.add(active);
    this.active.set(call.id, active);
    log.info({ attempt: starts }, 'call started');
    const startedAt = Date.now();
    const began = performance.now();
    // Progress goes out in order and before the result: the last report is awaited before the call ends.
    // Made on the first report: most tools never report, and this is the hot path.
    let reporting: Promise<void> | undefined;
    let throttle: ProgressThrottle | undefined;
    const onProgress = (progress: CallProgress): void => {
      throttle ??= new ProgressThrottle(d.progressIntervalMs, (next) => {
        reporting = (reporting ?? Promise.resolve()).then(() => d.answers.progress(envelope, next, log));
      });
      throttle.push(progress);
    };
    let result: ToolResult;
    try {
      // The sandbox keeps each caller's calls in processes of that caller's (docs/sandbox.md).
      const run = () => runExecutor(reserved?.executor ?? executorForCaller(executor!, envelope.caller), definition, call, { onCancellable: (cancel) => active.attach(cancel), attempt: starts, onProgress });
      result = d.tracer === undefined ? await run() : await d.tracer.execute(call, d.tier, envelope.trace, run);
    } finally {
      throttle?.close();
      this.active.delete(call.id);
      jobCalls.delete(active);
    }
    if (reporting !== undefined) await reporting;
    const elapsed = performance.now() - began;
    const ms = Math.round(elapsed);
    d.metrics?.observeRun(call.name, d.tier, { queueWaitMs: startedAt - envelope.enqueuedAt, executionMs: elapsed, endToEndMs: startedAt + elapsed - envelope.enqueuedAt });

    const code = result.error?.code;
    const next = afterRun(facts, { lostToShutdown: active.stoppedFor instanceof WorkerLostError, code, isError: result.isError });
    if (next.then === 'retry') {
      // Retries are jobs of their own, delayed with exponential backoff (a shutdown hands the call back at once).
      await durableStep('requeue', call.id, () => d.store.requeue(d.lane, call.id), log);
      try {
        // Through a Redis outage too: the call is queued again on its record. The job's id is fixed by the call and
        // the run, so an add that landed but lost its answer is not added twice when sent again.
        const jobId = `r-${envelope.token ?? call.id}-${starts}`;
        await durableStep('retry', call.id, () => d.retryQueue().add(call.name, envelope, { jobId, delay: next.delayMs, removeOnComplete: true, removeOnFail: { age: 24 * 3600 } }), log);
        log.warn({ ms, code, attempt: starts, delay: next.delayMs }, 'call failed; retrying');
      } catch (err) {
        // No retry job, no retry: end the call with what its last run gave rather than leave it queued forever.
        log.error({ err }, 'could not enqueue the retry; ending the call with its last result');
        await d.answers.finish(envelope, 'failed', result, 'queued');
      }
      return;
    }
    if (next.then === 'lost') {
      await d.answers.finish(envelope, 'failed', retryableOnlyIfSafe(errorResult(call, next.error), definition.retryable));
      log.warn({ ms }, 'call aborted by shutdown');
      return;
    }
    const status: CallStatus = code === 'CANCELLED' ? 'cancelled' : result.isError ? 'failed' : 'completed';
    // A failure after retries says how many runs the call had: each may have taken effect (WORKER_LOST's own word).
    const told = result.error !== undefined && starts > 1 ? { ...result, error: { ...result.error, details: { ...result.error.details, attempts: starts } } } : result;
    // The log says how the call ended, which a result past FORGE_MAX_RESULT_BYTES changes (RESOURCE_LIMIT).
    const ended = await d.answers.finish(envelope, status, retryableOnlyIfSafe(told, definition.retryable));
    log.info({ ms, status: ended?.status ?? status, code: ended === undefined ? code : ended.code }, 'call finished');
  }

  /**
   * A forged call ends as FORGED_CALL if its record is still `onlyFrom` (a
   * real call's job may have been tampered with; a call in another state is
   * left alone), and leaves an audit entry and a risk signal either way. A
   * replay is refused after the start step took it, so from `running`.
   */
  async #refuseForged(envelope: CallEnvelope, reason: string, onlyFrom: 'queued' | 'running' = 'queued'): Promise<void> {
    const d = this.#d;
    const { call } = envelope;
    const at = new Date().toISOString();
    const caller = envelope.caller === undefined ? {} : { caller: envelope.caller };
    d.risk.push({ kind: 'forged_call', at, callId: call.id, tool: call.name, scope: d.queue, reason, ...caller });
    await Promise.all([
      d.audit.record({ at, callId: call.id, tool: call.name, errorCategory: 'forged_call', scopeAtListing: null, scopeAtDispatch: d.queue, reason, ...caller }),
      d.answers.fail(envelope, new ForgedCallError(call.name, reason), onlyFrom),
    ]).catch((err: unknown) => d.log.error({ err, callId: call.id }, 'could not record a forged call'));
  }
}
