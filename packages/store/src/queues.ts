import { randomUUID } from 'node:crypto';
import { CallBatch, CallEnvelope, UnavailableError } from '@forge-fleet/shared';
import { type FleetKeys } from './keys.js';
import { Job, Queue, type RedisClient } from 'bullmq';
import type { Redis } from 'ioredis';
import { type CallRecord, createCallArgs, existingRecord, type NewCall } from './call-store.js';
import { isRedisAway, type RedisConnection } from './redis.js';
import { CREATE_CALL, CREATE_CALLS } from './scripts.js';

/**
 * BullMQ keeps its events stream at 10,000 entries by default; nothing on our
 * hot path reads it, so keep it short.
 */
const EVENTS_MAX_LEN = 100;

/** Most calls one job carries. @defaultValue 64 */
export const MAX_BATCH = 64;

/** Options every fleet job gets: results live in call records, so BullMQ keeps nothing. */
const JOB_OPTIONS = { removeOnComplete: true, removeOnFail: { age: 24 * 3600, count: 10_000 } } as const;

/**
 * A job's options: the fleet's, and an id fixed by its first call's
 * submission token, so a write sent again after Redis lost its answer adds
 * no second job (BullMQ keeps the first under that id).
 */
function jobOptions(envelopes: readonly CallEnvelope[]): typeof JOB_OPTIONS & { jobId?: string } {
  const token = envelopes[0]?.token;
  return token === undefined ? JOB_OPTIONS : { ...JOB_OPTIONS, jobId: `t-${token}` };
}

/** What `send` returns, or its synchronous throw as a rejection: every command of a corked write is settled alike. */
function issued<T>(send: () => Promise<T>): Promise<T> {
  try {
    return send();
  } catch (error) {
    return Promise.reject(error instanceof Error ? error : new Error(String(error)));
  }
}

/** A reply as `[error, value]`, as a pipeline's results are: a failed command is read, never thrown. */
function settle(reply: Promise<unknown>): Promise<[Error | null, unknown]> {
  return reply.then((value) => [null, value] as [null, unknown], (error: unknown) => [error instanceof Error ? error : new Error(String(error)), undefined]);
}

/** Opens a fleet queue with the fleet's options. */
export function openQueue(redis: RedisConnection, prefix: string, name: string): Queue {
  return new Queue(name, { connection: redis, prefix, streams: { events: { maxLen: EVENTS_MAX_LEN } } });
}

/**
 * The calls a fleet job carries: its envelope, or its batch's (see
 * TierQueues: a flush of one call is the envelope itself). Empty for data that
 * is neither — a job no dispatcher made.
 */
export function callsOfJob(data: unknown): CallEnvelope[] {
  // Decide the shape first: a failed parse builds an error object, which a single-call job should not pay for.
  const isBatch = typeof data === 'object' && data !== null && 'batch' in data;
  const parsed = isBatch ? CallBatch.safeParse(data) : CallEnvelope.safeParse(data);
  return !parsed.success ? [] : 'batch' in parsed.data ? parsed.data.batch : [parsed.data];
}

/** Where a call goes: one tool pack's queue of its lane (see packs.ts). */
export interface Route {
  /** The pack's BullMQ queue. */
  readonly queue: string;
  /** The pack's id: its live workers are counted in the same write as the job. */
  readonly pack: string;
}

/**
 * How long a flush that Redis did not take (a restart, a failover) is tried
 * again before its calls are answered UNAVAILABLE, for calls without a
 * deadline of their own (a call's deadline bounds it when sooner).
 */
export const ENQUEUE_OUTAGE_MS = 30_000;

/** What became of one submitted call. */
export type Submitted =
  /** Recorded and enqueued; `live` is the number of workers holding a lease on its pack as the job was added. */
  | { readonly created: true; readonly live: number }
  /** The id was taken: nothing was recorded, and the job's copy will be skipped (its token is not the record's). */
  | { readonly created: false; readonly existing: CallRecord };

/** What a flush wrote: each call's CREATE_CALL reply (`[error, reply]`, in order) and the pack's live lease count. */
interface Written {
  readonly records: readonly (readonly [Error | null, unknown])[];
  readonly live: number;
}

interface PendingCall {
  readonly call: NewCall;
  readonly route: Route;
  resolve(submitted: Submitted): void;
  reject(error: unknown): void;
}

/**
 * The dispatcher's side of the tier queues. Calls admitted in the same
 * event-loop turn for the same queue leave as one job (up to
 * {@link MAX_BATCH}); a lone call leaves as a job of its own. Nothing waits
 * for a batch to fill: the flush happens at the end of the turn.
 *
 * On one Redis server a flush is one write and one round trip: the calls'
 * records, their tools' live lease counts and the job go out together on the
 * queue's connection, records first. Redis runs a connection's commands in
 * order, so a worker can never take a job before its calls' records exist.
 * The records are created with EVAL, never EVALSHA: after a script-cache
 * flush ioredis would re-send a refused EVALSHA only after the job had been
 * added. On a Redis Cluster the keys of one flush lie in several slots, so
 * the records are written first and the job after (see #writeApart).
 */
export class TierQueues {
  readonly #queues = new Map<string, Queue>();
  readonly #pending = new Map<string, PendingCall[]>();
  readonly #redis: RedisConnection;
  readonly #keys: FleetKeys;
  readonly #retentionMs: number;

  constructor(redis: RedisConnection, keys: FleetKeys, retentionMs: number) {
    this.#redis = redis;
    this.#keys = keys;
    this.#retentionMs = retentionMs;
  }

  queue(name: string): Queue {
    let queue = this.#queues.get(name);
    if (queue === undefined) {
      queue = openQueue(this.#redis, this.#keys.prefix, name);
      this.#queues.set(name, queue);
    }
    return queue;
  }

  /**
   * Records an approved call and enqueues it on its route's queue, in one
   * write with the other calls of this turn for the same queue.
   * @throws UnavailableError when Redis did not take the write before the
   *   call's deadline (or {@link ENQUEUE_OUTAGE_MS}); nothing then runs under
   *   this submission unless its record and job both landed, and a
   *   resubmission of the id answers for it.
   * @throws the Redis error when Redis refused the write.
   */
  submit(call: NewCall, route: Route): Promise<Submitted> {
    const name = route.queue;
    let pending = this.#pending.get(name);
    if (pending === undefined) {
      pending = [];
      this.#pending.set(name, pending);
      const batch = pending;
      setImmediate(() => this.#flush(name, batch));
    }
    const submitted = new Promise<Submitted>((resolve, reject) => pending.push({ call, route, resolve, reject }));
    if (pending.length >= MAX_BATCH) this.#flush(name, pending);
    return submitted;
  }

  /**
   * Enqueues the job of a call whose record already exists (a call a person
   * has just approved, one re-homed from a pack that lost its workers).
   * Resolves once the job is in Redis. The job id is the submission token's,
   * so enqueueing the same envelope twice adds one job — unless `moved`: a
   * call re-homed gets a job id of its own, since the queue it goes to may
   * still hold the job it came in by (a worker that took it there sent it on
   * to another worker's own queue, and has not finished that job yet): BullMQ
   * would take the move for that job, and drop it.
   */
  async enqueueRecorded(envelope: CallEnvelope, queue: string, options: { readonly moved?: boolean } = {}): Promise<void> {
    const job = jobOptions([envelope]);
    await this.queue(queue).add(envelope.call.name, envelope, options.moved === true ? { ...job, jobId: `m-${envelope.token ?? envelope.call.id}-${randomUUID()}` } : job);
  }

  #flush(name: string, pending: PendingCall[]): void {
    if (this.#pending.get(name) !== pending) return; // already flushed (full batch)
    this.#pending.delete(name);
    this.#sendDurably(name, pending).catch((error: unknown) => {
      for (const p of pending) p.reject(error);
    });
  }

  /**
   * Sends a flush, and again while Redis is away, until the soonest deadline
   * of its calls (at most {@link ENQUEUE_OUTAGE_MS}). Sending again is safe:
   * a record that landed answers as taken under this submission's own token
   * (so it counts as created), and the job's id is fixed by its calls' tokens,
   * so BullMQ adds it once.
   */
  async #sendDurably(name: string, pending: readonly PendingCall[]): Promise<void> {
    const began = Date.now();
    let limit = began + ENQUEUE_OUTAGE_MS;
    for (const p of pending) if (p.call.envelope.deadline !== undefined) limit = Math.min(limit, p.call.envelope.deadline);
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.#send(name, pending);
      } catch (error) {
        if (!isRedisAway(error)) throw error;
        const wait = Math.min(1000, 50 * 2 ** attempt);
        if (Date.now() + wait > limit) throw new UnavailableError(error instanceof Error ? error.message : String(error), { cause: error, what: `the call could not be enqueued within ${Date.now() - began} ms` });
        await new Promise((resolve) => setTimeout(resolve, wait));
      }
    }
  }

  async #send(name: string, pending: readonly PendingCall[]): Promise<void> {
    const queue = this.queue(name);
    // BullMQ's own client (its job scripts are defined on it), raw ioredis underneath.
    const client = await queue.getBackend().client;
    // One queue, so one lane and one pack: every call of this flush goes to the same place.
    const { call: first, route } = pending[0]!;
    const { records, live } = client.isCluster ? await this.#writeApart(queue, client, pending, first.lane, route.pack) : await this.#writeTogether(queue, client, pending, first.lane, route.pack);
    const taken: { p: PendingCall; lane: string }[] = [];
    pending.forEach((p, i) => {
      const [error, reply] = records[i] ?? [new Error('no reply for the call record')];
      if (error !== null) p.reject(error);
      else if (reply === 0) p.resolve({ created: true, live });
      else taken.push({ p, lane: String(reply) });
    });
    // Taken ids (resubmissions) are rare: their records are read in a second round trip, one read per
    // record (on a cluster they lie in as many slots as there are ids).
    await Promise.all(
      taken.map(async ({ p, lane }) => {
        try {
          const hash = await this.#redis.hgetall(this.#keys.call(lane, p.call.id));
          const existing = existingRecord(p.call.id, lane, Object.entries(hash).flat());
          // This very submission's record, written by an earlier try of a flush Redis lost the answer to.
          if (existing.envelope?.token !== undefined && existing.envelope.token === p.call.envelope.token) p.resolve({ created: true, live });
          else p.resolve({ created: false, existing });
        } catch (error) {
          p.reject(error);
        }
      }),
    );
  }

  /**
   * One Redis server: the records, the job and the live lease count in one
   * write, records first — one round trip.
   *
   * Sent straight on the connection, corked into one write, not as a
   * pipeline: ioredis copies every script defined on a connection onto each
   * pipeline it makes, and BullMQ defines dozens on this one — ~40 µs a flush,
   * which at one call in flight is a flush per call.
   * @throws the Redis error when the job was not added.
   */
  async #writeTogether(queue: Queue, client: RedisClient, pending: readonly PendingCall[], lane: string, pack: string): Promise<Written> {
    const direct = client as unknown as Pick<Redis, 'eval' | 'zcount' | 'status' | 'stream'>;
    // Every record of the flush in one script (see CREATE_CALLS).
    const keys: string[] = [];
    const args: (string | number)[] = [this.#retentionMs];
    for (const { call } of pending) {
      keys.push(this.#keys.callLane(call.id), this.#keys.call(call.lane, call.id));
      const values = createCallArgs(call, this.#retentionMs);
      // createCallArgs leads with the retention, which CREATE_CALLS takes once.
      args.push(values.length - 1);
      for (let i = 1; i < values.length; i++) args.push(values[i]!);
    }
    // Commands issued on a ready connection are written at once, in order; corked, they leave in one write.
    // (One that is not ready queues them, in order, for when it is.)
    const socket = direct.status === 'ready' ? direct.stream : undefined;
    socket?.cork();
    // issued() never throws, so the socket is always uncorked.
    const recordsSent = settle(issued(() => direct.eval(CREATE_CALLS, keys.length, ...keys, ...args)));
    // Issued synchronously, after the records. Counted after the job is in: a worker that gives up its lease
    // later publishes that it left, and the dispatchers' re-read of the catalog then finds this job in a pack
    // without workers (and re-homes it). (Only a job script the server has forgotten — a restart — is re-sent
    // after the count; the periodic catalog read's sweep then finds the job.)
    const jobAdded = settle(issued(() => this.#job(queue, pending.map((p) => p.call.envelope)).addJob(client)));
    const liveCounted = settle(issued(() => direct.zcount(this.#keys.catalogPackLeases(lane, pack), Date.now(), '+inf')));
    socket?.uncork();
    const [[error, replies], [jobError], [liveError, live]] = await Promise.all([recordsSent, jobAdded, liveCounted]);
    if (jobError !== null) throw jobError;
    const records = pending.map((_, i): readonly [Error | null, unknown] => (error !== null ? [error, undefined] : [null, (replies as unknown[])[i]]));
    return { records, live: liveError === null ? Number(live) : 0 };
  }

  /**
   * A Redis Cluster: a pipeline (like a script) may only touch keys of one
   * slot, and each call's record lies in its own id's slot, the leases in the
   * catalog's and the job in the queue's. So the records and the lease counts
   * go out first, each to its shard (in parallel), and the job — carrying the
   * calls whose record was created — only once they are written: a worker can
   * still never take a job before its calls' records exist. Two round trips.
   * @throws the Redis error when the job was not added.
   */
  async #writeApart(queue: Queue, client: RedisClient, pending: readonly PendingCall[], lane: string, pack: string): Promise<Written> {
    const records = await Promise.all(pending.map(({ call }) => settle(this.#redis.eval(CREATE_CALL, 2, this.#keys.callLane(call.id), this.#keys.call(call.lane, call.id), ...createCallArgs(call, this.#retentionMs)))));
    // Created now, or by an earlier try of this flush (the id taken in this lane: its token is checked by #send).
    const created = pending.filter((p, i) => records[i]?.[0] === null && (records[i]?.[1] === 0 || records[i]?.[1] === p.call.lane));
    if (created.length > 0) await this.#job(queue, created.map((p) => p.call.envelope)).addJob(client);
    // Counted after the job is in: a pack that lost its last worker before this is seen as such.
    const live = await this.#redis.zcount(this.#keys.catalogPackLeases(lane, pack), Date.now(), '+inf');
    return { records, live };
  }

  /** The job carrying a flush's calls: the envelope itself for a lone call, else a batch (named `batch-<n>`, so its calls can be counted from its name: COUNT_CALLS). */
  #job(queue: Queue, envelopes: readonly CallEnvelope[]): Job {
    const first = envelopes[0]!;
    const options = jobOptions(envelopes);
    return envelopes.length === 1 ? new Job(queue, first.call.name, first, options) : new Job(queue, `batch-${envelopes.length}`, { v: 1, batch: [...envelopes] } satisfies CallBatch, options);
  }

  /**
   * Takes the jobs a queue holds but no worker runs: waiting, delayed, and
   * active ones whose lock has lapsed (their worker is gone). Each is removed
   * from the queue atomically (BullMQ refuses to remove a locked job), so of
   * several dispatchers sweeping the same queue only one gets a job. Returns
   * the calls of the jobs taken (at most `limit` jobs per call of this
   * method); what cannot be parsed as calls is removed and left out.
   */
  async takeStranded(queue: string, limit = 100): Promise<CallEnvelope[]> {
    const q = this.queue(queue);
    const jobs = await q.getJobs(['wait', 'prioritized', 'delayed', 'active'], 0, limit - 1);
    const taken: CallEnvelope[] = [];
    for (const job of jobs) {
      if (job?.id === undefined || (await q.remove(job.id)) !== 1) continue;
      taken.push(...callsOfJob(job.data));
    }
    return taken;
  }

  async close(): Promise<void> {
    await Promise.all([...this.#queues.values()].map((q) => q.close()));
    this.#queues.clear();
  }
}
