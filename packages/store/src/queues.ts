import { type CallEnvelope, queueName, type ToolDefinition } from '@forge-fleet/shared';
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';

/** How BullMQ retries a retryable tool. */
export interface RetryPolicy {
  /** Runs in all, the first included. @defaultValue 3 */
  readonly attempts: number;
  /** First backoff; doubled on each retry. @defaultValue 200 */
  readonly backoffMs: number;
}

export const DEFAULT_RETRY_POLICY: RetryPolicy = Object.freeze({ attempts: 3, backoffMs: 200 });

/**
 * BullMQ keeps its events stream at 10,000 entries by default; nothing on our
 * hot path reads it, so keep it short.
 */
const EVENTS_MAX_LEN = 100;

/** The queue a tool's calls go to: its tier's, or its host pool's. */
export function queueFor(prefix: string, definition: Pick<ToolDefinition, 'tier' | 'pool'>): string {
  return queueName(prefix, definition.tier, definition.tier === 'host' ? definition.pool : undefined);
}

/**
 * The dispatcher's side of the tier queues: one BullMQ Queue per queue name,
 * made on first use, all sharing one connection.
 */
export class TierQueues {
  readonly #queues = new Map<string, Queue>();
  readonly #redis: Redis;
  readonly #prefix: string;
  readonly #retry: RetryPolicy;

  constructor(redis: Redis, prefix: string, retry: RetryPolicy = DEFAULT_RETRY_POLICY) {
    this.#redis = redis;
    this.#prefix = prefix;
    this.#retry = retry;
  }

  queue(name: string): Queue {
    let queue = this.#queues.get(name);
    if (queue === undefined) {
      queue = new Queue(name, { connection: this.#redis, prefix: this.#prefix, streams: { events: { maxLen: EVENTS_MAX_LEN } } });
      this.#queues.set(name, queue);
    }
    return queue;
  }

  /**
   * Enqueues an approved call. The job id is the call id, so BullMQ itself
   * refuses a second job for the same call. Only retryable tools get more
   * than one attempt.
   */
  async enqueue(envelope: CallEnvelope, definition: ToolDefinition): Promise<void> {
    const queue = this.queue(queueFor(this.#prefix, definition));
    await queue.add(envelope.call.name, envelope, {
      jobId: envelope.call.id,
      attempts: definition.retryable ? this.#retry.attempts : 1,
      backoff: { type: 'exponential', delay: this.#retry.backoffMs },
      removeOnComplete: true,
      removeOnFail: { age: 24 * 3600, count: 10_000 },
    });
  }

  /** Removes a queued call's job (best effort: a job a worker already holds stays). */
  async remove(definition: ToolDefinition, callId: string): Promise<void> {
    try {
      await this.queue(queueFor(this.#prefix, definition)).remove(callId);
    } catch {
      // A locked (running) job cannot be removed; its worker sees the cancel flag instead.
    }
  }

  async close(): Promise<void> {
    await Promise.all([...this.#queues.values()].map((q) => q.close()));
    this.#queues.clear();
  }
}
