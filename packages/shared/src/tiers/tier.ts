import { z } from 'zod';

/**
 * Where a tool runs and what it may touch. There are exactly three tiers:
 *
 * | tier | number | runs | authorization |
 * |---|---|---|---|
 * | `platform` | 1 | in a sandbox worker | none |
 * | `host` | 2 | out of the sandbox, on host-pool nodes (network, databases) | a grant for the tool |
 * | `embedded` | 3 | inside a WASM module, in a sandbox worker | none (module-scoped) |
 */
export const Tier = z.enum(['platform', 'host', 'embedded']);
export type Tier = z.infer<typeof Tier>;

/**
 * A tier as people may write it: `external` is accepted as another name for
 * `host` (the reference crate calls the out-of-sandbox tier External).
 */
export const TierInput = z
  .enum(['platform', 'host', 'embedded', 'external'])
  .transform((t): Tier => (t === 'external' ? 'host' : t));
export type TierInput = z.input<typeof TierInput>;

/** Every tier, in tier-number order. */
export const TIERS: readonly Tier[] = Object.freeze(['platform', 'host', 'embedded']);

/** The tier's number in the three-tier model: platform 1, host 2, embedded 3. */
export function tierNumber(tier: Tier): 1 | 2 | 3 {
  switch (tier) {
    case 'platform':
      return 1;
    case 'host':
      return 2;
    case 'embedded':
      return 3;
  }
}
