import { z } from 'zod';
import { PoolName } from '../tools/definition.js';
import { Tier } from '../tiers/tier.js';

const count = z.number().int().nonnegative();

/**
 * One tool pack's queue of a lane (tier, or host pool) as `GET /v1/queues` reports it. Counts are
 * BullMQ jobs, not calls: calls admitted together for one queue travel as one
 * job (up to 64), so under load a job may stand for several calls.
 */
export const QueueStats = z.object({
  /** The lane the queue serves (`platform`, `embedded`, `host`, `host.<pool>`). */
  lane: z.string(),
  tier: Tier,
  /** Host pools only. */
  pool: PoolName.optional(),
  /** The BullMQ queue name: the lane's (`{<prefix>.<tier>[.<pool>]}`) followed by `.<pack id>`. */
  queue: z.string(),
  /** The tool pack whose workers take calls from this queue (workers serving exactly the same tools share one). */
  pack: z.string().optional(),
  /** The pack's tools, sorted by name. */
  tools: z.array(z.string()).optional(),
  /** Jobs no worker has taken yet (BullMQ's waiting and prioritized jobs). */
  waiting: count,
  /** Jobs a worker is running. */
  active: count,
  /** Jobs waiting out a retry backoff. */
  delayed: count,
  /** Failed jobs BullMQ still keeps (24 h, at most 10,000 per queue). */
  failed: count,
  /** Workers holding an unexpired lease on the pack. */
  workers: count,
  /** The waiting and active jobs counted in calls (a job may carry a batch of calls admitted together). */
  calls: z.object({ waiting: count, active: count }).optional(),
  /**
   * A worker's own queue (its `workers` is that one worker, also counted in its pack's queue): calls other workers
   * sent on to it, each of a caller whose session with a `perCaller` MCP server it holds. Absent on packs' queues.
   */
  direct: z.literal(true).optional(),
});
export type QueueStats = z.infer<typeof QueueStats>;

/** `GET /v1/queues` answer: every tool pack's queue with a live worker or jobs, sorted by lane and queue. */
export const QueueStatsList = z.object({
  queues: z.array(QueueStats),
  /** When the counts were read (epoch ms). */
  at: z.number().int().nonnegative(),
});
export type QueueStatsList = z.infer<typeof QueueStatsList>;
