import type { Tier } from './tier.js';

/**
 * Whether a tool runs inside a sandbox (platform and embedded tiers: no direct
 * access to networks, files or databases) or outside it (host tier).
 */
export type ExecutionContext = 'in_sandbox' | 'out_of_sandbox';

/** What a tool's tier implies for running it. */
export interface TierClassification {
  readonly toolName: string;
  readonly tier: Tier;
  /** True only for the host tier: the caller must hold a grant for the tool. */
  readonly requiresAuthorization: boolean;
  readonly executionContext: ExecutionContext;
}

/** True when calls of this tier need the caller's authorization (host tier only). */
export function requiresAuthorization(tier: Tier): boolean {
  return tier === 'host';
}

/** Where tools of this tier execute. */
export function executionContextFor(tier: Tier): ExecutionContext {
  return tier === 'host' ? 'out_of_sandbox' : 'in_sandbox';
}

/** Classifies one tool by its tier. The classification is fixed: no tier can skip the host-tier check. */
export function classifyTier(toolName: string, tier: Tier): TierClassification {
  return Object.freeze({
    toolName,
    tier,
    requiresAuthorization: requiresAuthorization(tier),
    executionContext: executionContextFor(tier),
  });
}
