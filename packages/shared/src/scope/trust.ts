import { z } from 'zod';

/**
 * How far the skill (prompt pack, plugin) driving an agent is trusted:
 * - `trusted`, `verified`: calls go through the normal approval step;
 * - `quarantined`: calls that leave the sandbox (host tier) are denied;
 * - `blocked`: every call is denied.
 */
export const TrustLevel = z.enum(['trusted', 'verified', 'quarantined', 'blocked']);
export type TrustLevel = z.infer<typeof TrustLevel>;
