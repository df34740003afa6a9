import { type CallBatch, type CallEnvelope, queueName, type ToolDefinition } from '@forge-fleet/shared';
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';

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
export function openQueue(redis: Redis, prefix: string, name: string): Queue {
  return new Queue(name, { connection: redis, prefix, streams: { events: { maxLen: EVENTS_MAX_LEN } } });
}

interface Pending {
  readonly envelopes: CallEnvelope[];
  readonly done: Promise<void>;
  resolve(): void;
  reject(error: unknown): void;
}

/**
 * The dispatcher's side of the tier queues. Calls admitted in the same
 * event-loop turn for the same queue leave as one job (up to
 * {@link MAX_BATCH}); a lone call leaves as a job of its own. Nothing waits
 * for a batch to fill: the flush happens at the end of the turn.
 */
export class TierQueues {
  readonly #queues = new Map<string, Queue>();
  readonly #pending = new Map<string, Pending>();
  readonly #redis: Redis;
  readonly #prefix: string;

  constructor(redis: Redis, prefix: string) {
    this.#redis = redis;
    this.#prefix = prefix;
  }

  queue(name: string): Queue {
    let queue = this.#queues.get(name);
    if (queue === undefined) {
      queue = openQueue(this.#redis, this.#prefix, name);
      this.#queues.set(name, queue);
    }
    return queue;
  }

  /** Enqueues an approved call; resolves once its job is in Redis. */
  enqueue(envelope: CallEnvelope, definition: ToolDefinition): Promise<void> {
    const name = queueFor(this.#prefix, definition);
    let pending = this.#pending.get(name);
    if (pending === undefined) {
      let resolve: () => void = () => {};
      let reject: (error: unknown) => void = () => {};
      const done = new Promise<void>((res, rej) => ((resolve = res), (reject = rej)));
      pending = { envelopes: [], done, resolve, reject };
      this.#pending.set(name, pending);
      setImmediate(() => this.#flush(name, pending!));
    }
    pending.envelopes.push(envelope);
    if (pending.envelopes.length >= MAX_BATCH) this.#flush(name, pending);
    return pending.done;
  }

  #flush(name: string, pending: Pending): void {
    if (this.#pending.get(name) !== pending) return; // already flushed (full batch)
    this.#pending.delete(name);
    const [first] = pending.envelopes;
    const queue = this.queue(name);
    const added =
      pending.envelopes.length === 1 && first !== undefined
        ? queue.add(first.call.name, first, JOB_OPTIONS)
        : queue.add('batch', { v: 1, batch: pending.envelopes } satisfies CallBatch, JOB_OPTIONS);
    added.then(
      () => pending.resolve(),
      (error: unknown) => pending.reject(error),
    );
  }

  async close(): Promise<void> {
    await Promise.all([...this.#queues.values()].map((q) => q.close()));
    this.#queues.clear();
  }
}
