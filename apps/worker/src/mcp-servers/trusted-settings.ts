import { ToolDefinition } from '@forge-fleet/shared';
import type { ToolOverrides } from './servers-file.js';

/** The settings of one MCP server's tool that the fleet acts on. */
export interface TrustedToolSettings {
  readonly retryable: boolean;
  readonly speculatable: boolean;
  readonly requiresConfirmation: boolean;
  /** `undefined`: the fleet's default timeout. */
  readonly timeoutMs: number | undefined;
  /** `undefined`: the dispatcher policy's deadline. */
  readonly approvalDeadlineMs: number | undefined;
}

// The fleet's own defaults for a tool nobody has vouched for, read from the one place that defines them.
const FLEET_DEFAULTS = ToolDefinition.pick({ retryable: true, speculatable: true, requiresConfirmation: true }).parse({});

/**
 * A tool's settings from what its server says about it (`annotations` from
 * `tools/list`) and what the servers file says (`overrides`).
 *
 * The file is trusted: the operator wrote it. Annotations are not — any server
 * may claim anything, and a mistaken claim is as bad as a lie — so they may
 * only make a tool *more* careful, never less. The file wins over both.
 *
 * - `readOnlyHint` changes nothing. It must never skip approval or confirmation,
 *   nor make a tool `speculatable` (a false claim would run a side effect the
 *   model never asked for) or `retryable`.
 * - `destructiveHint: true` turns on `requiresConfirmation`: a server that says
 *   its tool destroys things gets a person in the loop unless the file says
 *   otherwise. Only an explicit `true` counts (MCP's default when absent is
 *   `true`, which would put a person before every tool of every server), and it
 *   counts even beside `readOnlyHint: true` (MCP would ignore it there, but
 *   then a read-only claim would have removed a confirmation).
 * - `idempotentHint` changes nothing: `retryable` re-runs a call whose instance
 *   died mid-call, when it may already have taken effect. Trusting a wrong
 *   claim silently doubles a side effect (a charge, an issue filed twice);
 *   not trusting a right one costs a failed call the agent sees and can repeat.
 *   Only the file makes a tool retryable.
 * - `openWorldHint` changes nothing: what a server can reach is decided by its
 *   tier and sandbox, not by what it says it reaches.
 * - Approval is never derived from annotations at all: the dispatcher's policy
 *   and the tier decide it, and nothing returned here can loosen them.
 *
 * Non-boolean hints (`"true"`, `1`) count as absent.
 */
export function trustedSettings(annotations: unknown, overrides: ToolOverrides | undefined): TrustedToolSettings {
  const hint = (name: string): boolean => typeof annotations === 'object' && annotations !== null && (annotations as Record<string, unknown>)[name] === true;
  return Object.freeze({
    retryable: overrides?.retryable ?? FLEET_DEFAULTS.retryable,
    speculatable: overrides?.speculatable ?? FLEET_DEFAULTS.speculatable,
    requiresConfirmation: overrides?.requiresConfirmation ?? (hint('destructiveHint') || FLEET_DEFAULTS.requiresConfirmation),
    timeoutMs: overrides?.timeoutMs,
    approvalDeadlineMs: overrides?.approvalDeadlineMs,
  });
}
