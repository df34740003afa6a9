import { hash } from 'node:crypto';
import { ApprovalDeadlineSource, CallEnvelope, stableStringify, CallProgress, type CallStatus, CallStatus as CallStatusSchema, type CallView, ToolResult } from '@forge-fleet/shared';
import { type FleetKeys } from './keys.js';
import type { RedisConnection } from './redis.js';
import { REPLY_LIST_TTL_MS, ReplyPublisher } from './replies.js';
import { ADOPT_CALL, APPROVE_CALL, batchScript, CANCEL_CALL, CREATE_CALL, FINISH_CALL, luaScript, luaScriptAtOnce, PROGRESS_CALL, REQUEUE_CALL, START_CALL, VOID_CALL, WATCH_CALL } from './scripts.js';
import { StepBatch } from './step-batch.js';

/** A call's record in Redis. */
export interface CallRecord {
  readonly id: string;
  /** The lane (queue) whose key space holds the record. */
  readonly lane: string;
  readonly status: CallStatus;
  readonly name: string;
  /** The dispatcher that submitted the call. */
  readonly replyTo: string;
  readonly envelope: CallEnvelope | undefined;
  readonly result: ToolResult | undefined;
  /** Why it waits, when `awaiting_approval`. */
  readonly reason: string | undefined;
  /** Epoch ms by which a person must decide, when it waits for one. */
  readonly approvalDeadline: number | undefined;
  /** Where {@link approvalDeadline} came from (the policy, the tool's own, the default); undefined on records of older dispatchers. */
  readonly approvalDeadlineFrom: ApprovalDeadlineSource | undefined;
  /** Epoch ms when it was submitted. */
  readonly createdAt: number | undefined;
  /** Who approved (or modified) it, once a person has. */
  readonly decidedBy: string | undefined;
  /** The scope it was submitted under. */
  readonly scope: string | undefined;
  /** Epoch ms after which a queued call must not start. */
  readonly deadline: number | undefined;
  /** How many times a worker has started it. */
  readonly starts: number;
  /** The tool's latest progress report. */
  readonly progress: CallProgress | undefined;
  /** Hash of the tool and arguments as submitted (before any approval modified them): what a resubmission must match. */
  readonly request: string | undefined;
}

/** What a worker may do with a call it took from the queue. */
export type StartOutcome = 'started' | 'redelivered' | 'missing' | 'superseded' | 'final' | 'not_approved' | 'cancelled' | 'expired';

/** A run to count on its envelope's execution record as the call is taken (see CallStore.start). */
export interface RunClaim {
  /** The envelope's signature MAC: what names the envelope. */
  readonly mac: string;
  /** This run's own id, so a start resent through an outage counts it once. */
  readonly runId: string;
  /** When the record may go (epoch ms): past the envelope's signature, when no worker would take it anyway. */
  readonly keepUntil: number;
}

/** A new call's record, written before its envelope is enqueued. */
export interface NewCall {
  readonly id: string;
  /** The lane of the queue the call goes to (`laneOf(tier, pool)`). */
  readonly lane: string;
  readonly name: string;
  readonly status: 'queued' | 'awaiting_approval';
  readonly replyTo: string;
  readonly envelope: CallEnvelope;
  readonly reason?: string | undefined;
  /** With `awaiting_approval`: the epoch ms by which a person must decide. */
  readonly approvalDeadline?: number | undefined;
  /** Where that deadline came from, which an EXPIRED answer names as what to change. */
  readonly approvalDeadlineFrom?: ApprovalDeadlineSource | undefined;
  /** The scope it was submitted under (shown to the person deciding). */
  readonly scope?: string | undefined;
  /** Hash of the tool and arguments as submitted (see requestHash): a resubmission of the id must match it. */
  readonly request?: string | undefined;
}

/**
 * The CREATE_CALL arguments for a new call. Kept apart from {@link CallStore}
 * so the submit path can send the creation in the same write as the job that
 * carries the call (see TierQueues.submit).
 */
export function createCallArgs(call: NewCall, retentionMs: number): (string | number)[] {
  const args: (string | number)[] = [retentionMs, call.lane, 'status', call.status, 'name', call.name, 'replyTo', call.replyTo, 'envelope', JSON.stringify(call.envelope), 'createdAt', call.envelope.enqueuedAt, 'starts', 0];
  if (call.envelope.token !== undefined) args.push('token', call.envelope.token);
  if (call.envelope.deadline !== undefined) args.push('deadline', call.envelope.deadline);
  if (call.reason !== undefined) args.push('reason', call.reason);
  if (call.approvalDeadline !== undefined) args.push('approvalDeadline', call.approvalDeadline);
  if (call.approvalDeadlineFrom !== undefined) args.push('approvalDeadlineFrom', JSON.stringify(call.approvalDeadlineFrom));
  if (call.scope !== undefined) args.push('scope', call.scope);
  if (call.request !== undefined) args.push('request', call.request);
  return args;
}

/** The record of a taken id, read from the lane CREATE_CALL answered with. */
export function existingRecord(id: string, lane: string, flat: readonly string[]): CallRecord {
  const existing = parseRecord(id, lane, flat);
  if (existing === undefined) throw new Error(`call id '${id}' is taken in lane '${lane}' but its record cannot be read`);
  return existing;
}

function parseRecord(id: string, lane: string, flat: readonly string[]): CallRecord | undefined {
  if (flat.length === 0) return undefined;
  const h: Record<string, string> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) h[flat[i]!] = flat[i + 1]!;
  const status = CallStatusSchema.safeParse(h.status);
  if (!status.success) return undefined;
  const envelope = h.envelope === undefined ? undefined : CallEnvelope.safeParse(JSON.parse(h.envelope));
  const result = h.result === undefined ? undefined : ToolResult.safeParse(JSON.parse(h.result));
  const progress = h.progress === undefined ? undefined : CallProgress.safeParse(JSON.parse(h.progress));
  const approvalDeadlineFrom = h.approvalDeadlineFrom === undefined ? undefined : ApprovalDeadlineSource.safeParse(JSON.parse(h.approvalDeadlineFrom));
  return {
    id,
    lane,
    status: status.data,
    name: h.name ?? '',
    replyTo: h.replyTo ?? '',
    envelope: envelope?.success ? envelope.data : undefined,
    result: result?.success ? result.data : undefined,
    reason: h.reason,
    approvalDeadline: h.approvalDeadline === undefined ? undefined : Number(h.approvalDeadline),
    approvalDeadlineFrom: approvalDeadlineFrom?.success ? approvalDeadlineFrom.data : undefined,
    createdAt: h.createdAt === undefined ? undefined : Number(h.createdAt),
    decidedBy: h.decidedBy,
    scope: h.scope,
    deadline: h.deadline === undefined ? undefined : Number(h.deadline),
    starts: Number(h.starts ?? 0),
    progress: progress?.success ? progress.data : undefined,
    request: h.request,
  };
}

/**
 * What identifies a submitted call besides its id: its tool and its arguments
 * as canonical JSON (key order does not matter). A resubmission of an id is
 * the same call only when this matches (else IDEMPOTENCY_CONFLICT).
 */
export function requestHash(name: string, args: unknown): string {
  return hash('sha256', `${name}\n${stableStringify(args)}`, 'base64url');
}

/** How {@link CallStore.end} ends a call. */
export interface EndOptions {
  /** End it only from this status. */
  readonly onlyFrom?: CallStatus | undefined;
  /** The submitter named in the call's envelope: its reply is pushed in the ending step itself. */
  readonly replyTo?: string | undefined;
  /** The result, already serialised (a worker checks its size first). */
  readonly resultJson?: string | undefined;
  /** Runs the ending step (a worker's retries it through a Redis outage). @defaultValue runs it once */
  readonly step?: (<T>(transition: () => Promise<T>) => Promise<T>) | undefined;
}

/** The view the HTTP API answers with. */
export function viewOf(record: CallRecord): CallView {
  return {
    id: record.id,
    status: record.status,
    ...(record.result === undefined ? {} : { result: record.result }),
    ...(record.status === 'awaiting_approval' && record.reason !== undefined ? { reason: record.reason } : {}),
    ...(record.progress === undefined ? {} : { progress: record.progress }),
  };
}

/**
 * Call records: the one place a call's status changes. Every transition is a
 * Lua script on the call's own key, so concurrent dispatchers and workers
 * agree on it — above all, a call ends exactly once.
 */
export class CallStore {
  readonly #redis: RedisConnection;
  /** Tells waiting dispatchers that a call ended (see end). */
  readonly #replies: ReplyPublisher;
  readonly #keys: FleetKeys;
  readonly #retentionMs: number;
  readonly #create;
  readonly #start: (keys: readonly string[], args: readonly (string | number)[]) => Promise<[StartOutcome, number, number?]>;
  readonly #finish: (keys: readonly string[], args: readonly (string | number)[]) => Promise<string[] | null>;
  readonly #requeue;
  readonly #watch;
  readonly #cancel;
  readonly #void;
  readonly #adopt;
  readonly #approve;
  readonly #progress;
  readonly #inlineReplies: boolean;

  /** @param retentionMs how long records (and results) are kept after their last change. */
  constructor(redis: RedisConnection, keys: FleetKeys, retentionMs: number) {
    this.#redis = redis;
    this.#replies = new ReplyPublisher(redis, keys);
    this.#keys = keys;
    this.#retentionMs = retentionMs;
    this.#create = luaScript<0 | string>(redis, 'forgeCreateCall', 2, CREATE_CALL);
    const start = luaScript<[StartOutcome, number, number?]>(redis, 'forgeStartCall', 'variable', START_CALL);
    const finish = luaScript<string[] | null>(redis, 'forgeFinishCall', 'variable', FINISH_CALL);
    if (redis.isCluster === true) {
      // Calls lie in different slots: each step is a script run of its own.
      this.#start = start;
      this.#finish = finish;
    } else {
      // The starts (and the finishes) of one turn go out as one script run; see StepBatch.
      const starts = new StepBatch(start, luaScript<unknown[]>(redis, 'forgeStartCalls', 'variable', batchScript(START_CALL)), luaScriptAtOnce(redis, START_CALL));
      const finishes = new StepBatch(finish, luaScript<unknown[]>(redis, 'forgeFinishCalls', 'variable', batchScript(FINISH_CALL)), luaScriptAtOnce(redis, FINISH_CALL));
      this.#start = (keys: readonly string[], args: readonly (string | number)[]) => starts.run(keys, args);
      this.#finish = (keys: readonly string[], args: readonly (string | number)[]) => finishes.run(keys, args);
    }
    this.#void = luaScript<number>(redis, 'forgeVoidCall', 2, VOID_CALL);
    this.#adopt = luaScript<number>(redis, 'forgeAdoptCall', 1, ADOPT_CALL);
    this.#approve = luaScript<string[]>(redis, 'forgeApproveCall', 1, APPROVE_CALL);
    this.#progress = luaScript<string[] | null>(redis, 'forgeProgressCall', 2, PROGRESS_CALL);
    // Cluster slots separate a call from its submitter's reply list; there the reply goes out as its own command.
    this.#inlineReplies = redis.isCluster !== true;
    this.#requeue = luaScript<number>(redis, 'forgeRequeueCall', 1, REQUEUE_CALL);
    this.#watch = luaScript<string[]>(redis, 'forgeWatchCall', 2, WATCH_CALL);
    this.#cancel = luaScript<string[]>(redis, 'forgeCancelCall', 2, CANCEL_CALL);
  }

  /** Writes a new record. Returns the existing one instead when the id is taken (idempotent submission). */
  async create(call: NewCall): Promise<{ created: true } | { created: false; existing: CallRecord }> {
    const reply = await this.#create([this.#keys.callLane(call.id), this.#keys.call(call.lane, call.id)], createCallArgs(call, this.#retentionMs));
    if (reply === 0) return { created: true };
    return { created: false, existing: existingRecord(call.id, reply, await this.#hgetall(reply, call.id)) };
  }

  /**
   * Hands a still-queued call over to a new submission token and envelope
   * (see ADOPT_CALL); the caller enqueues the envelope's job next.
   * @returns whether the call was taken over (false: a worker started it, or it ended or was cancelled).
   */
  async adopt(lane: string, id: string, envelope: CallEnvelope & { token: string }): Promise<boolean> {
    return (await this.#adopt([this.#keys.call(lane, id)], [envelope.token, JSON.stringify(envelope)])) === 1;
  }

  /**
   * Deletes a call recorded and enqueued together when it turned out to have
   * no live worker (or Redis was away), unless a worker took it meanwhile.
   * @returns whether the call was withdrawn.
   */
  async withdraw(lane: string, id: string, token: string): Promise<boolean> {
    return (await this.#void([this.#keys.call(lane, id), this.#keys.callLane(id)], [token])) === 1;
  }

  /** The lane holding a call's record, or `undefined` for an unknown id. */
  async laneOf(id: string): Promise<string | undefined> {
    return (await this.#redis.get(this.#keys.callLane(id))) ?? undefined;
  }

  /** Reads a call by id alone (a dispatcher: one read for the lane, one for the record). */
  async get(id: string): Promise<CallRecord | undefined> {
    const lane = await this.laneOf(id);
    return lane === undefined ? undefined : this.getIn(lane, id);
  }

  /** Reads a call in a known lane (a worker reads only its own). */
  async getIn(lane: string, id: string): Promise<CallRecord | undefined> {
    return parseRecord(id, lane, await this.#hgetall(lane, id));
  }

  async #hgetall(lane: string, id: string): Promise<string[]> {
    return Object.entries(await this.#redis.hgetall(this.#keys.call(lane, id))).flat();
  }

  /**
   * A worker takes the call; see {@link StartOutcome}. `token` is the
   * submission token the job's envelope carries, if any.
   */
  /**
   * A worker takes a call (see START_CALL). With `claim`, the same step counts this run on the envelope's
   * execution record (the replay barrier): `runs` is how many runs the envelope has had, this one included (0
   * without a claim, or when the call was not taken). A claim resent with the same `runId` counts once.
   */
  async start(lane: string, id: string, workerId: string, token = '', claim?: RunClaim, now = Date.now()): Promise<{ outcome: StartOutcome; starts: number; runs: number }> {
    const keys = claim === undefined ? [this.#keys.call(lane, id)] : [this.#keys.call(lane, id), this.#keys.executions(lane, id, claim.mac)];
    const args = claim === undefined ? [now, workerId, token] : [now, workerId, token, claim.runId, Math.ceil(claim.keepUntil)];
    const [outcome, starts, runs] = await this.#start(keys, args);
    return { outcome, starts: Number(starts), runs: Number(runs ?? 0) };
  }

  /**
   * Ends a call exactly once and tells every dispatcher waiting for it: the
   * record's final transition (its script; with `onlyFrom`, only from that
   * status), the submitter's reply in the same step when `replyTo` names it
   * (saving a round trip on the hot path), the other waiters' replies after.
   * This is the one way a call ends, from its worker or from outside it (an
   * expiry, a denial, a failed enqueue, a cancellation of a queued call).
   * `step` wraps the transition (a worker retries it through a Redis outage);
   * the replies are sent once, after it lands.
   * @returns false when the call had already ended (or was not in `onlyFrom`): nothing was written or sent.
   */
  async end(lane: string, id: string, status: CallStatus, result: ToolResult, options: EndOptions = {}): Promise<boolean> {
    // A caller that has already serialised the result (to check its size) passes the text along.
    const resultJson = options.resultJson ?? JSON.stringify(result);
    const keys = [this.#keys.call(lane, id), this.#keys.watchers(lane, id)];
    const args: (string | number)[] = [status, resultJson, Date.now(), this.#retentionMs, options.onlyFrom ?? ''];
    if (options.replyTo !== undefined && this.#inlineReplies) {
      keys.push(this.#keys.replies(lane, options.replyTo));
      // The ReplyMessage, spliced around the result's JSON instead of serialising the result twice.
      args.push(`{"v":1,"id":${JSON.stringify(id)},"status":"${status}","result":${resultJson}}`, options.replyTo, REPLY_LIST_TTL_MS);
    }
    const transition = () => this.#finish(keys, args);
    const targets = await (options.step === undefined ? transition() : options.step(transition));
    if (targets === null) return false;
    if (targets.length > 0) await this.#replies.publish(lane, targets, { v: 1, id, status, result });
    return true;
  }

  /**
   * Keeps a running call's latest progress report, if `workerId` still runs
   * it. Returns the dispatchers to pass the report to, or `undefined` when the
   * call is no longer that worker's to report on.
   */
  async progress(lane: string, id: string, workerId: string, progress: CallProgress): Promise<string[] | undefined> {
    const targets = await this.#progress([this.#keys.call(lane, id), this.#keys.watchers(lane, id)], [workerId, JSON.stringify(progress)]);
    return targets === null ? undefined : targets;
  }

  /** Puts a running call back to queued before BullMQ retries it. */
  async requeue(lane: string, id: string): Promise<boolean> {
    return (await this.#requeue([this.#keys.call(lane, id)], [])) === 1;
  }

  /**
   * A person approved (or modified) a waiting call: it becomes queued. The
   * caller enqueues its job next. `envelope` replaces the stored one (a
   * modification); the approval index is cleared by the caller.
   */
  async approve(lane: string, id: string, by: string, decision: 'approved' | 'modified', envelope?: CallEnvelope, now = Date.now()): Promise<{ outcome: 'ok' | 'expired' | 'missing' } | { outcome: 'not_waiting'; status: CallStatus }> {
    const [outcome, status] = await this.#approve([this.#keys.call(lane, id)], [now, by, decision, envelope === undefined ? '' : JSON.stringify(envelope)]);
    if (outcome === 'not_waiting') return { outcome, status: status as CallStatus };
    return { outcome: outcome as 'ok' | 'expired' | 'missing' };
  }

  /** Adds a waiting call to the approval index (sent in the same write as its record). */
  indexApproval(id: string, deadline: number): Promise<number> {
    return this.#redis.zadd(this.#keys.approvals, deadline, id);
  }

  /** Removes a decided or ended call from the approval index. */
  async unindexApproval(id: string): Promise<void> {
    await this.#redis.zrem(this.#keys.approvals, id);
  }

  /** Ids waiting for a person, oldest deadline first; with `dueBy`, only those whose deadline has passed. */
  /** How many calls wait for a person (the approval index's size). */
  pendingApprovals(): Promise<number> {
    return this.#redis.zcard(this.#keys.approvals);
  }

  async approvalIds(options: { limit?: number; dueBy?: number } = {}): Promise<string[]> {
    return this.#redis.zrangebyscore(this.#keys.approvals, '-inf', options.dueBy ?? '+inf', 'LIMIT', 0, options.limit ?? 1000);
  }

  /** Reads the record and, if it is still open, registers `dispatcherId` to be told when it ends. */
  async watch(id: string, dispatcherId: string): Promise<CallRecord | undefined> {
    const lane = await this.laneOf(id);
    if (lane === undefined) return undefined;
    return parseRecord(id, lane, await this.#watch([this.#keys.call(lane, id), this.#keys.watchers(lane, id)], [dispatcherId, this.#retentionMs]));
  }

  /**
   * Cancels a call: a queued one ends now, and every dispatcher waiting for
   * it is told; a running one is flagged, and its lane's workers are told to
   * stop it (see {@link signalCancel}).
   */
  async cancel(lane: string, id: string, cancelledResult: ToolResult): Promise<{ state: 'missing' | 'final' | 'running' | 'cancelled' }> {
    const [state, ...targets] = await this.#cancel([this.#keys.call(lane, id), this.#keys.watchers(lane, id)], [JSON.stringify(cancelledResult), Date.now(), this.#retentionMs]);
    if (state === 'cancelled') await this.#replies.publish(lane, targets, { v: 1, id, status: 'cancelled', result: cancelledResult });
    return { state: state as 'missing' | 'final' | 'running' | 'cancelled' };
  }

  /**
   * Hears the cancel signals of one lane's calls on `subscriber` (a
   * connection in subscriber mode, which may carry other channels too).
   * Cancellation is rare: one broadcast channel per lane, heard by every
   * worker of the lane, is enough.
   */
  static async onCancelSignal(subscriber: RedisConnection, keys: FleetKeys, lane: string, onCancel: (callId: string) => void): Promise<void> {
    const channel = keys.cancelChannel(lane);
    subscriber.on('message', (heard: string, callId: string) => {
      if (heard === channel) onCancel(callId);
    });
    await subscriber.subscribe(channel);
  }

  /** Tells the lane's workers to stop a running call (its handler's signal fires; its worker then ends it). */
  async signalCancel(lane: string, id: string): Promise<void> {
    await this.#redis.publish(this.#keys.cancelChannel(lane), id);
  }

}
