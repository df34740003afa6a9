import { readFileSync } from 'node:fs';
import {
  allOf,
  AllowList,
  Approval,
  type ApprovalHandler,
  assertToolPattern,
  ConfigInvalidError,
  DEFAULT_APPROVAL_DEADLINE_MS,
  isFleetError,
  LOST_KEY_PROBLEM,
  lostKeyPaths,
  toolMatcher,
} from '@forge-fleet/shared';
import { type Document, isMap, isNode, isScalar, LineCounter, parseDocument, visit } from 'yaml';
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
 * The dispatcher's policy, as a file operators can read (JSON or YAML; YAML is
 * a superset of JSON, so one parser serves both and every error names a line):
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
    throw new ConfigInvalidError('policy file', [`FORGE_POLICY_FILE: cannot read ${path}: ${error instanceof Error ? error.message : String(error)}`], { cause: error });
  }
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, prettyErrors: false });
  const at = (offset: number): string => {
    const { line, col } = lines.linePos(offset);
    return `${path}:${line}:${col}`;
  };
  if (doc.errors.length > 0) throw new ConfigInvalidError('policy file', doc.errors.map((e) => `${at(e.pos[0])}: ${e.message}`));
  const value: unknown = plainValue(doc, at, path);
  // An empty document (or only comments) is null: say what the file needs rather than "expected object".
  if (value === null || value === undefined) throw new ConfigInvalidError('policy file', [`${path}: the file is empty; it needs at least \`version: 1\` (see "Policy as a file" in README.md)`]);
  const lost = lostKeyPaths(value);
  if (lost.length > 0) {
    throw new ConfigInvalidError(
      'policy file',
      lost.map((p) => {
        // The key's own place: its value may be anywhere below it.
        const parent = doc.getIn(p.slice(0, -1), true);
        const pair = isMap(parent) ? parent.items.find((item) => isScalar(item.key) && item.key.value === p[p.length - 1]) : undefined;
        const where = isNode(pair?.key) && pair.key.range ? at(pair.key.range[0]) : path;
        return `${where}: ${p.join('.')}: ${LOST_KEY_PROBLEM}`;
      }),
    );
  }
  const parsed = Policy.safeParse(value);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => {
      // The deepest node of the issue's path that exists in the file gives its line.
      let node: unknown;
      for (let depth = issue.path.length; depth >= 0 && !isNode(node); depth--) node = doc.getIn(issue.path.slice(0, depth) as (string | number)[], true);
      const where = isNode(node) && node.range !== undefined && node.range !== null ? at(node.range[0]) : path;
      return `${where}: ${issue.path.length === 0 ? '(root)' : issue.path.join('.')}: ${issue.message}`;
    });
    throw new ConfigInvalidError('policy file', problems, { cause: parsed.error });
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

/**
 * How long a call of `tool` waits for a person: the policy's deadline for it
 * (exact name first, then patterns), else the tool's own (`approvalDeadlineMs`
 * of its definition, e.g. from an MCP servers file), else the policy's default.
 */
export function approvalDeadlineOf(policy: Policy): (tool: string, own?: number) => number {
  const entries = Object.entries(policy.approval.deadlines);
  const exact = new Map(entries);
  const patterns = entries.filter(([p]) => p.endsWith('*')).map(([p, ms]) => [toolMatcher([p]), ms] as const);
  return (tool, own) => exact.get(tool) ?? patterns.find(([matches]) => matches(tool))?.[1] ?? own ?? policy.approval.deadlineMs;
}

/**
 * The document's plain value. The parser refuses to expand aliases (`*name`)
 * past a limit — aliases of aliases grow exponentially ("billion laughs") —
 * by throwing a bare ReferenceError; here that is a CONFIG_INVALID at the
 * file's first alias (the same as apps/worker/src/mcp-servers/yaml-source.ts), like any other mistake in the file.
 */
function plainValue(doc: Document, at: (offset: number) => string, path: string): unknown {
  try {
    return doc.toJS();
  } catch (error) {
    if (!(error instanceof ReferenceError)) throw error;
    let first: number | undefined;
    visit(doc, {
      Alias(_key, node) {
        first = node.range?.[0];
        return visit.BREAK;
      },
    });
    throw new ConfigInvalidError('policy file', [`${first === undefined ? path : at(first)}: the file expands its aliases (*name) too often (${error.message}); write the values out instead`]);
  }
}
