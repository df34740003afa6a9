import { readFileSync } from 'node:fs';
import {
  allOf,
  AllowList,
  Approval,
  type ApprovalDeadlineSource,
  type ApprovalHandler,
  assertToolPattern,
  ConfigInvalidError,
  DEFAULT_APPROVAL_DEADLINE_MS,
  isFleetError,
  toolMatcher,
} from '@forge-fleet/shared';
import { parseConfigSource, schemaProblems } from '@forge-fleet/shared/yaml-source';
import { z } from 'zod';
import { approvalPolicy } from './policy.js';

/**
 * A tool name or `prefix.*` / `*` pattern, checked where it is read with the check the scope and approval
 * steps apply (`assertToolPattern`), so a pattern they would refuse never gets past start-up.
 */
export const ToolPattern = z.string().superRefine((pattern, ctx) => {
  try {
    assertToolPattern(pattern);
  } catch (error) {
    // The reason alone: the error's own message speaks of "a tool definition", which a pattern is not.
    const reason = isFleetError(error) ? error.details['reason'] : undefined;
    ctx.addIssue({ code: 'custom', message: typeof reason === 'string' ? reason : error instanceof Error ? error.message : String(error) });
  }
});

/**
 * The dispatcher's policy, as a file operators can read (YAML, or strict JSON
 * when named `*.json`; every error names a line):
 *
 * ```yaml
 * version: 1
 * approval:
 *   default: tier              # tier | auto | deny
 *   allow: ["search.*", clock] # only these tools are approved at all (absent: every tool)
 *   people: [refund, "db.*"]   # every call of these waits for a person
 *   deadlineMs: 900000         # how long a call waits for a person (default 15 min)
 *   deadlines: { refund: 3600000 }  # per tool or pattern
 * scopes:                      # what each task type may list and call
 *   research: ["search.*", clock]
 * defaultScope: ["*"]          # callers whose token names no task type or scope
 * ```
 */
export const Policy = z.strictObject({
  version: z.literal(1),
  approval: z
    .strictObject({
      default: z.enum(['tier', 'auto', 'deny']).default('tier'),
      allow: z.array(ToolPattern).optional(),
      people: z.array(ToolPattern).default([]),
      deadlineMs: z.number().int().positive().default(DEFAULT_APPROVAL_DEADLINE_MS),
      deadlines: z.record(ToolPattern, z.number().int().positive()).default({}),
    })
    .prefault({}),
  scopes: z.record(z.string().min(1), z.array(ToolPattern)).default({}),
  defaultScope: z.array(ToolPattern).default(['*']),
});
export type Policy = z.infer<typeof Policy>;

/** The effective policy and where it came from, as `GET /v1/policy` shows it. */
export interface LoadedPolicy {
  readonly policy: Readonly<Policy>;
  /** The file it was read from, or `environment` (FORGE_APPROVAL, FORGE_SCOPES, FORGE_DEFAULT_SCOPE). */
  readonly source: string;
}

/**
 * Reads and checks a policy file once, at start-up.
 * @throws ConfigInvalidError naming each problem's line and path in the file.
 */
export function loadPolicyFile(path: string): LoadedPolicy {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new ConfigInvalidError('policy file', [`FORGE_POLICY_FILE: cannot read ${path}: ${error instanceof Error ? error.message : String(error)}; set FORGE_POLICY_FILE to a policy file the dispatcher can read`], { cause: error });
  }
  const source = parseConfigSource(path, text, 'policy file');
  // An empty document (or only comments) is null: say what the file needs rather than "expected object".
  if (source.value === null || source.value === undefined) throw new ConfigInvalidError('policy file', [`${path}: the file is empty; it needs at least \`version: 1\` (see "Policy as a file" in README.md)`]);
  const parsed = Policy.safeParse(source.value);
  if (!parsed.success) {
    // Said as the servers file's are: at the key for a key's problem, else the deepest node of the path in the file.
    throw new ConfigInvalidError('policy file', schemaProblems(Policy, parsed.error.issues, source), { cause: parsed.error });
  }
  return { policy: Object.freeze(parsed.data), source: path };
}

/** The policy the environment variables describe, when no file is given. */
export function policyFromEnv(env: { approval: 'tier' | 'auto' | 'deny'; scopes: Readonly<Record<string, readonly string[]>>; defaultScope: readonly string[]; approvalDeadlineMs: number }): LoadedPolicy {
  const parsed = Policy.safeParse({
    version: 1,
    approval: { default: env.approval, deadlineMs: env.approvalDeadlineMs },
    scopes: env.scopes,
    defaultScope: env.defaultScope,
  });
  if (!parsed.success) {
    // parseDispatcherEnv checks these already; should one get past it, name the variable rather than dump the ZodError.
    const variableOf = ([first, ...rest]: readonly PropertyKey[]): PropertyKey[] =>
      first === 'scopes' ? ['FORGE_SCOPES', ...rest] : first === 'defaultScope' ? ['FORGE_DEFAULT_SCOPE', ...rest] : rest[0] === 'deadlineMs' ? ['FORGE_APPROVAL_DEADLINE_MS'] : ['FORGE_APPROVAL'];
    const problems = parsed.error.issues.map((i) => `${variableOf(i.path).map(String).join('.')}: ${i.message}`);
    throw new ConfigInvalidError('dispatcher environment', problems, { cause: parsed.error });
  }
  return { policy: Object.freeze(parsed.data), source: 'environment' };
}

/**
 * The approval step a policy describes: its default handler, then the allow
 * list, then "these tools need a person" — every one must agree (a denial
 * ends it; a person's turn makes the call wait).
 */
export function approvalHandlerOf(policy: Policy): ApprovalHandler {
  const handlers: ApprovalHandler[] = [approvalPolicy(policy.approval.default)];
  if (policy.approval.allow !== undefined) handlers.push(new AllowList(policy.approval.allow));
  if (policy.approval.people.length > 0) {
    const needsPerson = toolMatcher(policy.approval.people);
    handlers.push({ check: (call) => (needsPerson(call.name) ? Approval.pending(`the policy sends every call of '${call.name}' to a person`) : Approval.approve()) });
  }
  return handlers.length === 1 ? handlers[0]! : allOf(...handlers);
}

/** How long a call waits for a person, and where that came from (what to change for a longer one). */
export interface ApprovalDeadline {
  readonly ms: number;
  readonly from: ApprovalDeadlineSource;
}

/** Picks a call's approval deadline: for its tool, given the tool's own (its definition's `approvalDeadlineMs`). */
export type ApprovalDeadlineFor = (tool: string, own?: number) => ApprovalDeadline;

/**
 * How long a call of `tool` waits for a person: the policy's deadline for it
 * (exact name first, then patterns), else the tool's own (`approvalDeadlineMs`
 * of its definition, e.g. from an MCP servers file), else the policy's default;
 * with which of them it was, so an EXPIRED call can name the setting to change.
 */
export function approvalDeadlineOf(policy: Policy): ApprovalDeadlineFor {
  const entries = Object.entries(policy.approval.deadlines);
  const exact = new Map(entries);
  const patterns = entries.filter(([p]) => p.endsWith('*')).map(([p, ms]) => [p, toolMatcher([p]), ms] as const);
  return (tool, own) => {
    const named = exact.get(tool);
    if (named !== undefined) return { ms: named, from: { from: 'policy', entry: tool } };
    const matched = patterns.find(([, matches]) => matches(tool));
    if (matched !== undefined) return { ms: matched[2], from: { from: 'policy', entry: matched[0] } };
    if (own !== undefined) return { ms: own, from: { from: 'tool' } };
    return { ms: policy.approval.deadlineMs, from: { from: 'default' } };
  };
}
