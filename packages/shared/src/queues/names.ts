import type { Tier } from '../tiers/tier.js';

/**
 * Lane names: what a worker's key, its tier and pool, and a call's signature
 * agree on (the dispatchers sign each lane's calls with a key derived from
 * the lane's queue name). The Redis key layout built on them, and the queues
 * of each lane's tool packs, are packages/store's (keys.ts).
 *
 * BullMQ forbids `:` in queue names and adds `<prefix>:` itself. Each lane's
 * queue name is a Redis Cluster hash tag (`{…}`), so all of a lane's queues
 * live in one slot while tiers and pools spread over the cluster.
 */

/** The prefix of a fleet that names none (`FORGE_PREFIX`). */
export const DEFAULT_FLEET_PREFIX = 'forge';

/** Fleet prefixes become part of queue names: the same rules as pool names, no `:`, `{`, `}`. */
export const FLEET_PREFIX_PATTERN = /^[A-Za-z0-9_-]{1,32}$/;

/** The queue a tool's calls go to: one per tier, and one per named host pool. */
export function queueName(prefix: string, tier: Tier, pool?: string): string {
  return pool === undefined ? `{${prefix}.${tier}}` : `{${prefix}.${tier}.${pool}}`;
}

/**
 * A lane: the part of the fleet's state that belongs to one queue (`platform`,
 * `embedded`, `host`, `host.<pool>`). Call records, reply lists and the cancel
 * channel are split by lane so that each worker role's Redis user can be
 * confined to its own (see infra/redis): a sandbox worker cannot read or
 * alter a Host call's record.
 */
export function laneOf(tier: Tier, pool?: string): string {
  // Pools exist for Host-tier tools only, as in queueFor.
  return tier === 'host' && pool !== undefined ? `host.${pool}` : tier;
}
