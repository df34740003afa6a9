import { z } from 'zod';
import { PoolName } from '../tools/definition.js';
import { Tier } from '../tiers/tier.js';

const count = z.number().int().nonnegative();

/**
 * One tier (or host pool) queue as `GET /v1/queues` reports it. Counts are
 * BullMQ jobs, not calls: calls admitted together for one queue travel as one
 * job (up to 64), so under load a job may stand for several calls.
 */
export const QueueStats = z.object({
  /** The lane the queue serves (`platform`, `embedded`, `host`, `host.<pool>`). */
  lane: z.string(),
  tier: Tier,
  /** Host pools only. */
  pool: PoolName.optional(),
  /** The BullMQ queue name (`{<prefix>.<tier>[.<pool>]}`). */
  queue: z.string(),
  /** Jobs no worker has taken yet (BullMQ's waiting and prioritized jobs). */
  waiting: count,
  /** Jobs a worker is running. */
  active: count,
  /** Jobs waiting out a retry backoff. */
  delayed: count,
  /** Failed jobs BullMQ still keeps (24 h, at most 10,000 per queue). */
  failed: count,
  /** Distinct workers holding an unexpired lease on at least one of the lane's tools. */
  workers: count,
});
export type QueueStats = z.infer<typeof QueueStats>;

/** `GET /v1/queues` answer: every queue some worker has announced tools for, sorted by lane. */
export const QueueStatsList = z.object({
  queues: z.array(QueueStats),
  /** When the counts were read (epoch ms). */
  at: z.number().int().nonnegative(),
});
export type QueueStatsList = z.infer<typeof QueueStatsList>;
