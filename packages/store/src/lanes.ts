import { laneOf, PoolName, queueName, type Tier, TIERS } from '@forge-fleet/shared';

/**
 * The tier and pool of a lane, or `undefined` for a name no lane has: workers
 * register their lanes themselves, so a lane name read from Redis is not to
 * be believed blindly (it ends up in key names and glob patterns).
 */
export function parseLane(lane: string): { tier: Tier; pool?: string } | undefined {
  if ((TIERS as readonly string[]).includes(lane)) return { tier: lane as Tier };
  const pool = lane.startsWith('host.') ? lane.slice('host.'.length) : undefined;
  if (pool === undefined || !PoolName.safeParse(pool).success || laneOf('host', pool) !== lane) return undefined;
  return { tier: 'host', pool };
}

/**
 * The lane's own queue name (`{<prefix>.<lane>}`): the hash tag every queue of
 * the lane starts with, and the name its calls' signing key derives from.
 * @throws RangeError for a name that is not a lane.
 */
export function laneQueueName(prefix: string, lane: string): string {
  const parsed = parseLane(lane);
  if (parsed === undefined) throw new RangeError(`'${lane}' is not a lane name`);
  return queueName(prefix, parsed.tier, parsed.tier === 'host' ? parsed.pool : undefined);
}
