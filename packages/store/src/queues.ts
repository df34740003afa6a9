import { type CallBatch, type CallEnvelope, type FleetKeys, queueName, type ToolDefinition } from '@forge-fleet/shared';
import { type IRedisTransaction, Job, Queue, type RedisClient } from 'bullmq';
import type { ChainableCommander } from 'ioredis';
import { type CallRecord, createCallArgs, existingRecord, type NewCall } from './call-store.js';
import type { RedisConnection } from './redis.js';
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

/** The queue a tool's calls go to: its tier's, or its host pool's. */
export function queueFor(prefix: string, definition: Pick<ToolDefinition, 'tier' | 'pool'>): string {
  return queueName(prefix, definition.tier, definition.tier === 'host' ? definition.pool : undefined);
}

/** Opens a fleet queue with the fleet's options. */
export function openQueue(redis: RedisConnection, prefix: string, name: string): Queue {
  return new Queue(name, { connection: redis, prefix, streams: { events: { maxLen: EVENTS_MAX_LEN } } });
}

/** What became of one submitted call. */
export type Submitted =
  /** Recorded and enqueued; `live` is the number of workers holding a lease on its tool as the record was written. */
  | { readonly created: true; readonly live: number }
  /** The id was taken: nothing was recorded, and the job's copy will be skipped (its token is not the record's). */
  | { readonly created: false; readonly existing: CallRecord };

/** What a flush wrote: each call's CREATE_CALL reply (`[error, reply]`, in order) and each tool's live lease count. */
interface Written {
  readonly records: readonly (readonly [Error | null, unknown])[];
  readonly live: ReadonlyMap<string, number>;
}

interface PendingCall {
  readonly call: NewCall;
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
   * Records an approved call and enqueues it, in one write with the other
   * calls of this turn for the same queue.
   * @throws the Redis error when the record or the job could not be written
   *   (a call whose job failed is ended as failed by the caller).
   */
  submit(call: NewCall, definition: Pick<ToolDefinition, 'tier' | 'pool'>): Promise<Submitted> {
    const name = queueFor(this.#keys.prefix, definition);
    let pending = this.#pending.get(name);
    if (pending === undefined) {
      pending = [];
      this.#pending.set(name, pending);
      const batch = pending;
      setImmediate(() => this.#flush(name, batch));
    }
    const submitted = new Promise<Submitted>((resolve, reject) => pending.push({ call, resolve, reject }));
    if (pending.length >= MAX_BATCH) this.#flush(name, pending);
    return submitted;
  }

  /**
   * Enqueues the job of a call whose record already exists (a call a person
   * has just approved). Resolves once the job is in Redis.
   */
  async enqueueRecorded(envelope: CallEnvelope, definition: Pick<ToolDefinition, 'tier' | 'pool'>): Promise<void> {
    await this.queue(queueFor(this.#keys.prefix, definition)).add(envelope.call.name, envelope, JOB_OPTIONS);
  }

  #flush(name: string, pending: PendingCall[]): void {
    if (this.#pending.get(name) !== pending) return; // already flushed (full batch)
    this.#pending.delete(name);
    this.#send(name, pending).catch((error: unknown) => {
      for (const p of pending) p.reject(error);
    });
  }

  async #send(name: string, pending: readonly PendingCall[]): Promise<void> {
    const queue = this.queue(name);
    // BullMQ's own client (its job scripts are defined on it), raw ioredis underneath.
    const client = await queue.getBackend().client;
    const tools = [...new Set(pending.map((p) => p.call.name))];
    // One queue, so one lane: every call of this flush goes to the same place.
    const lane = pending[0]!.call.lane;
    const { records, live } = client.isCluster ? await this.#writeApart(queue, client, pending, lane, tools) : await this.#writeTogether(queue, client, pending, lane, tools);
    const taken: { p: PendingCall; lane: string }[] = [];
    pending.forEach((p, i) => {
      const [error, reply] = records[i] ?? [new Error('no reply for the call record')];
      if (error !== null) p.reject(error);
      else if (reply === 0) p.resolve({ created: true, live: live.get(p.call.name) ?? 0 });
      else taken.push({ p, lane: String(reply) });
    });
    // Taken ids (resubmissions) are rare: their records are read in a second round trip, one read per
    // record (on a cluster they lie in as many slots as there are ids).
    await Promise.all(
      taken.map(async ({ p, lane }) => {
        try {
          const hash = await this.#redis.hgetall(this.#keys.call(lane, p.call.id));
          p.resolve({ created: false, existing: existingRecord(p.call.id, lane, Object.entries(hash).flat()) });
        } catch (error) {
          p.reject(error);
        }
      }),
    );
  }

  /**
   * One Redis server: the records, the live lease counts and the job in one
   * pipeline, records first — one write, one round trip.
   * @throws the Redis error when the job was not added.
   */
  async #writeTogether(queue: Queue, client: RedisClient, pending: readonly PendingCall[], lane: string, tools: readonly string[]): Promise<Written> {
    const pipeline = client.pipeline() as IRedisTransaction & Pick<ChainableCommander, 'eval' | 'zcount'>;
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
    pipeline.eval(CREATE_CALLS, keys.length, ...keys, ...args);
    const now = Date.now();
    for (const tool of tools) pipeline.zcount(this.#keys.catalogLeases(lane, tool), now, '+inf');
    // Queued on the pipeline synchronously; its outcome is read from the pipeline's results below.
    this.#job(queue, pending.map((p) => p.call.envelope)).addJob(pipeline).catch(() => undefined);
    const results = (await pipeline.exec()) ?? [];
    const added = results[1 + tools.length];
    if (added === undefined || added[0] !== null) throw added?.[0] ?? new Error('the job was not added');
    const [error, replies] = results[0] ?? [new Error('no reply for the call records')];
    const records = pending.map((_, i): readonly [Error | null, unknown] => (error !== null ? [error, undefined] : [null, (replies as unknown[])[i]]));
    return { records, live: new Map(tools.map((tool, i) => [tool, Number(results[1 + i]?.[1] ?? 0)])) };
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
  async #writeApart(queue: Queue, client: RedisClient, pending: readonly PendingCall[], lane: string, tools: readonly string[]): Promise<Written> {
    const settle = (reply: Promise<unknown>): Promise<[Error | null, unknown]> => reply.then((value) => [null, value] as [null, unknown], (error: unknown) => [error instanceof Error ? error : new Error(String(error)), undefined]);
    const now = Date.now();
    const [records, counts] = await Promise.all([
      Promise.all(pending.map(({ call }) => settle(this.#redis.eval(CREATE_CALL, 2, this.#keys.callLane(call.id), this.#keys.call(call.lane, call.id), ...createCallArgs(call, this.#retentionMs))))),
      Promise.all(tools.map((tool) => this.#redis.zcount(this.#keys.catalogLeases(lane, tool), now, '+inf'))),
    ]);
    const created = pending.filter((_, i) => records[i]?.[0] === null && records[i]?.[1] === 0);
    if (created.length > 0) await this.#job(queue, created.map((p) => p.call.envelope)).addJob(client);
    return { records, live: new Map(tools.map((tool, i) => [tool, counts[i] ?? 0])) };
  }

  /** The job carrying a flush's calls: the envelope itself for a lone call, else a batch. */
  #job(queue: Queue, envelopes: readonly CallEnvelope[]): Job {
    const first = envelopes[0]!;
    return envelopes.length === 1 ? new Job(queue, first.call.name, first, JOB_OPTIONS) : new Job(queue, 'batch', { v: 1, batch: [...envelopes] } satisfies CallBatch, JOB_OPTIONS);
  }

  async close(): Promise<void> {
    await Promise.all([...this.#queues.values()].map((q) => q.close()));
    this.#queues.clear();
  }
}
