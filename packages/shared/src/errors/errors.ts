import { z } from 'zod';
import { ErrorCode } from './codes.js';
import { type ErrorDetails, FleetError } from './fleet-error.js';

/** Shows a JSON Pointer the way people read it: the root is `/`. */
export function displayPath(pointer: string): string {
  return pointer === '' ? '/' : pointer;
}

/** A tool was asked for by name, and nothing serves that name. */
export class ToolNotFoundError extends FleetError {
  readonly code = ErrorCode.TOOL_NOT_FOUND;
  constructor(
    readonly toolName: string,
    options: { known?: readonly string[]; remedy?: string; cause?: unknown } = {},
  ) {
    const known = options.known ?? [];
    const hint =
      known.length === 0
        ? 'no tools are registered yet'
        : `known tools: ${known.slice(0, 10).join(', ')}${known.length > 10 ? ', …' : ''}`;
    super(
      `tool '${toolName}' not found; ${options.remedy ?? 'register it before calling it'} (${hint})`,
      { toolName },
      { cause: options.cause },
    );
  }
}

/** One failing rule of a JSON Schema, as reported to clients that want them all. */
export interface SchemaIssue {
  /** JSON Pointer to the failing value; `''` is the whole arguments object. */
  readonly path: string;
  /** What the schema expected there. */
  readonly reason: string;
  /** The schema keyword that failed (`type`, `required`, `minimum`…). */
  readonly keyword: string;
}

/**
 * Where in the pipeline the arguments were checked: at submission, after an
 * approval step modified them, or again when the tool's definition changed
 * after the call was admitted (an MCP server changed its schema while the
 * call waited for a person, or in a queue).
 */
export type ValidationStage = 'arguments' | 'after_modify' | 'definition_changed';

/**
 * Most issues a schema refusal lists. Every failing rule is found (ajv runs
 * with `allErrors`), but a 240 KB argument of 120,000 wrong items fails
 * 120,000 rules: a 7 MB answer, written again into every record and log
 * line that holds the error. The first ones say what to fix; the count says
 * how many there are.
 */
export const MAX_LISTED_ISSUES = 100;

/** Arguments do not conform to the tool's `parameters` schema. */
export class SchemaValidationError extends FleetError {
  readonly code = ErrorCode.SCHEMA_VALIDATION;
  readonly toolName: string;
  /** JSON Pointer of the first failing field (`''` for the arguments as a whole). */
  readonly path: string;
  /** What was expected at {@link path}. */
  readonly reason: string;
  /** The failing rules, first one first: at most {@link MAX_LISTED_ISSUES} of them (`details.issueCount` counts all). */
  readonly issues: readonly SchemaIssue[];
  /**
   * @param args.remedy what to do instead of calling again: a person whose decision was refused sends another (the
   *   call keeps waiting).
   */
  constructor(args: { toolName: string; issues: readonly [SchemaIssue, ...SchemaIssue[]]; stage?: ValidationStage; remedy?: string }) {
    const [first] = args.issues;
    const stage = args.stage ?? 'arguments';
    const count = args.issues.length;
    const listed = args.issues.slice(0, MAX_LISTED_ISSUES);
    const more =
      count <= 1
        ? ''
        : count > MAX_LISTED_ISSUES
          ? ` (and ${count - 1} more problem(s); details.issues lists the first ${MAX_LISTED_ISSUES})`
          : ` (and ${count - 1} more problem(s), see details.issues)`;
    const after = stage === 'after_modify' ? ' after the approval step modified them' : stage === 'definition_changed' ? " no longer fit its definition, which changed after the call was admitted, and" : '';
    super(
      `arguments for tool '${args.toolName}'${after} failed schema validation at '${displayPath(first.path)}': ${first.reason}${more}; ${args.remedy ?? "fix the arguments to match the tool's parameters schema and call again"}`,
      { toolName: args.toolName, path: first.path, reason: first.reason, stage, issues: listed, issueCount: count },
    );
    this.toolName = args.toolName;
    this.path = first.path;
    this.reason = first.reason;
    this.issues = Object.freeze(listed);
  }
}

/** The approval step refused the call. */
export class ApprovalDeniedError extends FleetError {
  readonly code = ErrorCode.APPROVAL_DENIED;
  constructor(
    readonly toolName: string,
    readonly reason: string,
  ) {
    super(
      `call to tool '${toolName}' was denied by the approval step: ${reason}; change the call or ask for the authorization it needs`,
      { toolName, reason },
    );
  }
}

/** The call waits for a person's decision before it may run. */
export class ApprovalPendingError extends FleetError {
  readonly code = ErrorCode.APPROVAL_PENDING;
  constructor(
    readonly toolName: string,
    readonly reason: string,
    readonly callId: string,
  ) {
    super(
      `call '${callId}' to tool '${toolName}' is waiting for approval: ${reason}; confirm it to run it, or deny it`,
      { toolName, reason, callId },
    );
  }
}

/** The tool ran and failed. */
export class ExecutionFailedError extends FleetError {
  readonly code = ErrorCode.EXECUTION_FAILED;
  constructor(
    readonly toolName: string,
    readonly reason: string,
    options: { cause?: unknown; details?: ErrorDetails } = {},
  ) {
    super(`tool '${toolName}' failed: ${reason}`, { ...options.details, toolName, reason }, { cause: options.cause });
  }
}

/** The tool ran past its `timeoutMs`; its AbortSignal was fired. */
export class ExecutionTimeoutError extends FleetError {
  readonly code = ErrorCode.EXECUTION_TIMEOUT;
  constructor(
    readonly toolName: string,
    readonly timeoutMs: number,
  ) {
    super(
      `tool '${toolName}' did not finish within its ${timeoutMs} ms timeout and was aborted; raise the tool's timeoutMs (its definition's, or for an MCP server's tool tools.<name>.timeoutMs in the servers file), or make the tool stop sooner when cancelled (a handler: honour ctx.signal)`,
      { toolName, timeoutMs },
    );
  }
}

/** The call was cancelled by its caller before it finished. */
export class CancelledError extends FleetError {
  readonly code = ErrorCode.CANCELLED;
  constructor(
    readonly toolName: string,
    readonly reason: string,
  ) {
    super(`call to tool '${toolName}' was cancelled: ${reason}`, { toolName, reason });
  }
}

/** The tool's structured result does not match its declared `outputSchema`. */
export class OutputValidationError extends FleetError {
  readonly code = ErrorCode.OUTPUT_VALIDATION;
  constructor(
    readonly toolName: string,
    readonly path: string,
    readonly reason: string,
  ) {
    super(
      `tool '${toolName}' returned a result that does not match its outputSchema at '${displayPath(path)}': ${reason}; fix the handler or the outputSchema`,
      { toolName, path, reason },
    );
  }
}

/** A tool was defined or served with a tier that does not fit. */
export class InvalidTierError extends FleetError {
  readonly code = ErrorCode.INVALID_TIER;
  constructor(args: { toolName: string; expected: string; actual: string; hint: string }) {
    super(
      `tool '${args.toolName}' has an invalid tier: expected ${args.expected}, got ${args.actual}; ${args.hint}`,
      { toolName: args.toolName, expected: args.expected, actual: args.actual },
    );
  }
}

/** A registry operation was refused (duplicate name, frozen registry…). */
export class RegistryError extends FleetError {
  readonly code = ErrorCode.REGISTRY_ERROR;
  constructor(
    readonly reason: string,
    details: ErrorDetails = {},
  ) {
    super(`tool registry error: ${reason}`, { ...details, reason });
  }
}

/** The tool exists but is outside the caller's active capability scope. */
export class OutOfScopeError extends FleetError {
  readonly code = ErrorCode.OUT_OF_SCOPE;
  constructor(
    readonly toolName: string,
    readonly scopeName: string,
  ) {
    super(
      `tool '${toolName}' is outside the active scope '${scopeName}'; list the tools this scope admits and call one of them, or run the task under a scope that includes it`,
      { toolName, scope: scopeName },
    );
  }
}

/** A tool definition is malformed: bad name, invalid JSON Schema, bad flag. */
export class InvalidDefinitionError extends FleetError {
  readonly code = ErrorCode.INVALID_DEFINITION;
  constructor(args: { toolName: string | undefined; path: string; reason: string; cause?: unknown }) {
    const who = args.toolName === undefined ? 'a tool definition' : `the definition of tool '${args.toolName}'`;
    super(
      `${who} is invalid at '${displayPath(args.path)}': ${args.reason}`,
      { toolName: args.toolName, path: args.path, reason: args.reason },
      { cause: args.cause },
    );
  }
}

/** A fenced tool block in a model's text could not be turned into a call. */
export class MalformedToolBlockError extends FleetError {
  readonly code = ErrorCode.MALFORMED_TOOL_BLOCK;
  constructor(args: { line: number; column: number; offset: number; reason: string }) {
    super(
      `malformed tool_call block at line ${args.line}, column ${args.column}: ${args.reason}; write the block body as JSON {"name": "...", "arguments": {...}}`,
      { line: args.line, column: args.column, offset: args.offset, reason: args.reason },
    );
  }
}

/** Options or environment variables failed their schema. */
export class ConfigInvalidError extends FleetError {
  readonly code = ErrorCode.CONFIG_INVALID;
  constructor(what: string, problems: readonly string[], options: { cause?: unknown } = {}) {
    super(`invalid ${what}: ${problems.join('; ')}`, { what, problems }, options);
  }
}

/** Something failed that no other code describes; a bug to report. */
export class InternalError extends FleetError {
  readonly code = ErrorCode.INTERNAL;
  constructor(message: string, options: { cause?: unknown } = {}) {
    super(message, {}, options);
  }
}

/** A request is malformed (not JSON, wrong shape, unknown task type…). */
export class BadRequestError extends FleetError {
  readonly code = ErrorCode.BAD_REQUEST;
  constructor(reason: string, details: ErrorDetails = {}) {
    super(`bad request: ${reason}`, { ...details, reason });
  }
}

/** The caller presented credentials the fleet does not accept. */
export class UnauthenticatedError extends FleetError {
  readonly code = ErrorCode.UNAUTHENTICATED;
  constructor(reason: string) {
    super(`not authenticated: ${reason}`, { reason });
  }
}

/**
 * The fleet's Redis cannot be reached right now (restarting, failing over, a
 * network cut), or this dispatcher is shutting down: nothing was decided. Safe to send again — a call carries its
 * id, so a submission sent twice is answered for, never run twice.
 */
export class UnavailableError extends FleetError {
  readonly code = ErrorCode.UNAVAILABLE;
  /** @param options.what what cannot take the request. @defaultValue "the fleet's Redis cannot be reached right now" */
  constructor(reason: string, options: { cause?: unknown; what?: string } = {}) {
    super(`${options.what ?? "the fleet's Redis cannot be reached right now"} (${reason}); send the request again in a moment`, { reason }, options.cause === undefined ? {} : { cause: options.cause });
  }
}

/** The tool is known, but no live worker serves it right now. */
export class NoWorkerError extends FleetError {
  readonly code = ErrorCode.NO_WORKER;
  /**
   * @param options.runs how often the call had already run, when it was waiting to run again (a retryable tool's
   *   retry) as its last worker went: whether those runs took effect is unknown, and the message says so.
   * @param options.ended the call was admitted and has ended without running (its worker went, or what runs the tool
   *   is down): its id keeps this answer, so the message says to send it again with a new one, not to "call again".
   * @param options.reason why no worker can run it, when known (an MCP server that is not running, and why).
   */
  constructor(
    readonly toolName: string,
    readonly queue: string,
    options: { readonly runs?: number; readonly lane?: { readonly tier: string; readonly pool?: string | undefined } | undefined; readonly ended?: boolean; readonly reason?: string } = {},
  ) {
    const { lane, reason } = options;
    const worker = lane === undefined ? 'forge-worker' : `forge-worker --tier ${lane.tier}${lane.pool === undefined ? '' : ` --pool ${lane.pool}`}`;
    const start = `a worker of its ${lane === undefined ? 'tier' : lane.pool === undefined ? `tier (${lane.tier})` : `tier and pool (${lane.tier}, ${lane.pool})`} that serves it (\`${worker} --tools <module>\`, or \`--mcp <servers file>\` for an MCP server's tool, whose server must be up and list it: the worker's /readyz says)`;
    const runs = options.runs ?? 0;
    super(
      runs > 0
        ? `no live worker serves tool '${toolName}' (queue ${queue}) to run the call again: it had already run ${runs} time${runs === 1 ? '' : 's'}, and whether that took effect is unknown; check before calling it again, once ${start} is up`
        : options.ended === true
          ? `no live worker can run tool '${toolName}' (queue ${queue})${reason === undefined ? '' : `: ${reason}`}; the call ended without running, and its id keeps this answer: once ${start} is up, send the call again with a new id`
          : `no live worker serves tool '${toolName}' (queue ${queue}); start ${start}, then call again`,
      { toolName, queue, ...(runs > 0 ? { runs } : {}), ...(reason === undefined ? {} : { reason }) },
    );
  }
}

/** No call with this id is known (never submitted, or past its retention time). */
export class CallNotFoundError extends FleetError {
  readonly code = ErrorCode.CALL_NOT_FOUND;
  constructor(readonly callId: string) {
    super(`no call with id '${callId}' is known; it was never submitted or its result has passed the retention time`, { callId });
  }
}

/** A request body is larger than the fleet accepts. */
export class PayloadTooLargeError extends FleetError {
  readonly code = ErrorCode.PAYLOAD_TOO_LARGE;
  constructor(readonly limitBytes: number) {
    super(`the request body is larger than ${limitBytes} bytes; send smaller arguments (pass large data by reference, e.g. a URL)`, { limitBytes });
  }
}

/**
 * Where the approval deadline of a call that waits for a person came from
 * (the dispatcher's `approvalDeadlineOf` picks it, in this order), which is
 * what to change for a longer one:
 * - `policy`: an entry of the policy file's `approval.deadlines`, the tool's
 *   name or a pattern matching it (`entry`);
 * - `tool`: the tool's own `approvalDeadlineMs` (its definition's; for an MCP
 *   server's tool, `tools.<name>.approvalDeadlineMs` in the servers file);
 * - `default`: neither names one, so the policy's default applied
 *   (`approval.deadlineMs` in the policy file, or `FORGE_APPROVAL_DEADLINE_MS`).
 * Kept on the call's record as it was picked at admission; decoding ignores
 * unknown fields, and a source this version does not know fails to decode
 * (the message then names every place).
 */
export const ApprovalDeadlineSource = z.discriminatedUnion('from', [
  z.object({ from: z.literal('policy'), entry: z.string() }),
  z.object({ from: z.literal('tool') }),
  z.object({ from: z.literal('default') }),
]);
export type ApprovalDeadlineSource = z.infer<typeof ApprovalDeadlineSource>;

/** What to change for a longer approval deadline, given where the call's came from (undefined: not recorded). */
function longerApprovalDeadline(source: ApprovalDeadlineSource | undefined): string {
  const mcp = "for an MCP server's tool tools.<name>.approvalDeadlineMs in the servers file";
  const byDefault = 'approval.deadlineMs in the policy file, or FORGE_APPROVAL_DEADLINE_MS without one';
  switch (source?.from) {
    case 'policy':
      return `raise the deadline the policy file gives it: its approval.deadlines entry '${source.entry}' set this one`;
    case 'tool':
      return `raise the tool's own approvalDeadlineMs, which set this one (its definition's, or ${mcp}); an approval.deadlines entry for the tool in the policy file would win over it`;
    case 'default':
      return `give it a longer deadline: the tool has none of its own, so the default applied (${byDefault}); one for the tool alone goes in the policy file's approval.deadlines, or in its definition's approvalDeadlineMs (${mcp})`;
    case undefined:
      return `give it a longer deadline: the policy file's approval.deadlines, the tool's own approvalDeadlineMs (${mcp}), or the default (${byDefault})`;
  }
}

/** The call was still queued when its deadline passed, so it was never executed. */
export class ExpiredError extends FleetError {
  readonly code = ErrorCode.EXPIRED;
  /**
   * @param waiting what the call waited for when its deadline passed: a worker (its `expireAfterMs` ran out
   *   in the queue) or a person (nobody decided before its approval deadline). @defaultValue 'worker'
   * @param deadlineFrom with `person`: where the approval deadline came from, which the message names as what
   *   to change (`details.deadlineFrom`, and `details.policyEntry` for a policy entry); unknown, it names every place.
   */
  constructor(
    readonly toolName: string,
    readonly deadline: number,
    readonly waiting: 'worker' | 'person' = 'worker',
    deadlineFrom?: ApprovalDeadlineSource,
  ) {
    const at = new Date(deadline).toISOString();
    const from = waiting === 'person' && deadlineFrom !== undefined ? { deadlineFrom: deadlineFrom.from, ...(deadlineFrom.from === 'policy' ? { policyEntry: deadlineFrom.entry } : {}) } : {};
    super(
      waiting === 'person'
        ? `call to tool '${toolName}' expired at ${at} waiting for a person to approve it, and was not executed; decide sooner (an approver token: forge approvals), or ${longerApprovalDeadline(deadlineFrom)}`
        : `call to tool '${toolName}' expired at ${at} before a worker started it, and was not executed; allow more time or add workers for its tier`,
      { toolName, deadline, waiting, ...from },
    );
  }
}

/**
 * How a call was lost with its worker, which is also why it is not run again:
 * - `lock_expired`: its worker stopped answering (died, or was cut off from
 *   Redis) and the call's lock expired; the tool is not flagged `retryable`.
 * - `shutdown`: its worker shut down, past its grace period, before the call
 *   finished; the tool is not flagged `retryable`.
 * - `retries_exhausted`: the tool is `retryable`, but the call has had all the
 *   runs `FORGE_RETRY_ATTEMPTS` allows, and the last one was lost with its worker.
 */
export type WorkerLossReason = 'lock_expired' | 'shutdown' | 'retries_exhausted';

const WORKER_LOSS_REASONS: ReadonlySet<string> = new Set<WorkerLossReason>(['lock_expired', 'shutdown', 'retries_exhausted']);

/** What a {@link WorkerLostError} may say besides its reason. */
export interface WorkerLostOptions {
  /** Free text for people (which run, what the worker saw); kept as `details.detail`. */
  readonly detail?: string;
  /** Runs the call has had, the lost one included; kept as `details.attempts`. Required for `retries_exhausted`. */
  readonly attempts?: number;
}

/**
 * The worker running the call was lost before the call finished, and the call
 * ends without another run: whether it took effect is unknown.
 * `details.reason` is its {@link WorkerLossReason}.
 */
/**
 * The MCP server instance running a call ended (died, or was replaced for not
 * answering) before the call did: whether the call took effect is unknown.
 * Retryable as a kind; a tool not flagged retryable is not run again, and its
 * caller is told `retryable: false`. On a `perCaller` server the instance was
 * the caller's session, which ended with it (`details.session`).
 */
export class McpServerLostError extends FleetError {
  readonly code = ErrorCode.MCP_SERVER_LOST;
  /** The instance for people: `pid 4242` for a process, `session 6f1c… at https://host/mcp` for an HTTP session. */
  readonly instance: string;
  /** How the call's own answer broke off, the instance serving on; undefined when the instance ended. */
  readonly answerCut: string | undefined;
  constructor(
    readonly toolName: string,
    readonly server: string,
    /** A process id, or the instance's label. */
    instance: number | string,
    /**
     * @param options.session `ended` when the instance held the caller's own session (a `perCaller` server): the
     *   message says that session and its state are gone, and `details.session` is `ended`.
     * @param options.answerCut how the call's own answer broke off (an HTTP upstream's connection for that one
     *   request), the instance serving on: the message says so instead of an end of the instance, and
     *   `details.answer` is `cut`.
     */
    options: { stderrTail?: string; cause?: unknown; session?: 'ended'; answerCut?: string } = {},
  ) {
    const label = typeof instance === 'number' ? `pid ${instance}` : instance;
    const tail = options.stderrTail === undefined || options.stderrTail === '' ? '' : `; its last stderr: ${options.stderrTail}`;
    const session = options.session === 'ended' ? `; your session on MCP server '${server}' ended with it, and what the server held for you there is gone: your next call starts a new session` : '';
    const what =
      options.answerCut === undefined
        ? `the instance (${label}) of MCP server '${server}' running tool '${toolName}' ended before the call did`
        : `the answer of MCP server '${server}' (${label}) to tool '${toolName}' broke off before it was whole (${options.answerCut})`;
    super(
      `${what}, so whether it took effect is unknown${tail}${session}; check before calling it again`,
      { toolName, server, instance: label, ...(options.session === undefined ? {} : { session: options.session }), ...(options.answerCut === undefined ? {} : { answer: 'cut' }) },
      { cause: options.cause },
    );
    this.instance = label;
    this.answerCut = options.answerCut;
  }
}

export class WorkerLostError extends FleetError {
  readonly code = ErrorCode.WORKER_LOST;
  /** How the call was lost; `undefined` only when built with the deprecated free-text form. */
  readonly reason: WorkerLossReason | undefined;
  constructor(toolName: string, reason: 'lock_expired' | 'shutdown', options?: WorkerLostOptions);
  constructor(toolName: string, reason: 'retries_exhausted', options: WorkerLostOptions & { readonly attempts: number });
  /**
   * @deprecated Pass a {@link WorkerLossReason}, with the text as `options.detail`:
   * this form cannot say why the call was not run again.
   */
  constructor(toolName: string, reason: string);
  constructor(
    readonly toolName: string,
    reason: string,
    options: WorkerLostOptions = {},
  ) {
    const { detail, attempts } = options;
    const typed = isWorkerLossReason(reason);
    super(
      typed
        ? workerLostMessage(toolName, reason, detail, attempts)
        : `the worker running tool '${toolName}' was lost (${reason}) and the call was not run again; check whether it took effect before calling it again`,
      {
        toolName,
        reason,
        ...(detail === undefined ? {} : { detail }),
        ...(attempts === undefined ? {} : { attempts }),
      },
    );
    this.reason = typed ? reason : undefined;
  }
}

function isWorkerLossReason(value: string): value is WorkerLossReason {
  return WORKER_LOSS_REASONS.has(value);
}

function workerLostMessage(toolName: string, reason: WorkerLossReason, detail: string | undefined, attempts: number | undefined): string {
  const aside = detail === undefined ? '' : ` (${detail})`;
  const check = 'check whether it took effect before calling it again';
  switch (reason) {
    case 'lock_expired':
      return `the worker running tool '${toolName}' stopped answering and the call's lock expired${aside}; the tool is not flagged retryable, so the call was not run again — ${check}`;
    case 'shutdown':
      return `the worker running tool '${toolName}' shut down before the call finished${aside}; the tool is not flagged retryable, so the call was not run again — ${check}`;
    case 'retries_exhausted': {
      const runs = attempts === undefined ? 'as many times' : `${attempts} time${attempts === 1 ? '' : 's'}, as many`;
      return `the call to tool '${toolName}' was lost with its worker on its last run${aside}; it has been run ${runs} as the retry limit FORGE_RETRY_ATTEMPTS allows, so it was not run again — ${check}, or raise FORGE_RETRY_ATTEMPTS`;
    }
  }
}

/** No HTTP route matches the request. */
export class RouteNotFoundError extends FleetError {
  readonly code = ErrorCode.ROUTE_NOT_FOUND;
  constructor(method: string, url: string) {
    super(`no route ${method} ${url}; the API is under /v1 (GET /v1/tools, POST /v1/calls, GET /v1/calls/:id, POST /v1/calls/:id/cancel)`, { method, url });
  }
}

/** The caller stopped waiting for a call that has not ended; the call itself goes on. */
export class WaitTimeoutError extends FleetError {
  readonly code = ErrorCode.WAIT_TIMEOUT;
  constructor(
    readonly callId: string,
    readonly timeoutMs: number,
    readonly status: string,
  ) {
    super(`call '${callId}' had not ended after ${timeoutMs} ms (status: ${status}); it goes on in the fleet — wait for it again by id, or cancel it`, { callId, timeoutMs, status });
  }
}

/**
 * A worker refused a call it cannot trust: unsigned, badly signed, altered
 * since the dispatcher signed it, moved onto another queue, or past its
 * signed deadline. It never runs.
 */
export class ForgedCallError extends FleetError {
  readonly code = ErrorCode.FORGED_CALL;
  constructor(
    readonly toolName: string,
    readonly reason: string,
  ) {
    super(`the call to tool '${toolName}' was refused by its worker: ${reason}; only calls signed by a dispatcher for this queue run — submit it through a dispatcher`, { toolName, reason });
  }
}

/** The caller is authenticated but its role may not do this. */
export class ForbiddenError extends FleetError {
  readonly code = ErrorCode.FORBIDDEN;
  constructor(
    readonly action: string,
    readonly role: string,
    readonly needed: readonly string[],
  ) {
    super(`a caller with role '${role}' may not ${action}; it needs one of the roles ${needed.map((r) => `'${r}'`).join(', ')} — ask for a token with that role`, { action, role, needed });
  }
}

/** Who stopped a call at a limit, and what the caller can change: a sandbox's limits are the pool's to raise; the worker's bounds on a result are not the caller's. */
export interface ResourceLimitWho {
  /** @defaultValue 'its sandbox' */
  readonly by?: string;
  /** @defaultValue "lower the work per call or raise the pool's sandbox limit" */
  readonly remedy?: string;
}

/**
 * A call hit one of its limits (CPU time, memory, output size) and was
 * stopped: by its sandbox, or by the worker refusing a result too large.
 * Running it again with the same arguments hits the same limit.
 */
export class ResourceLimitError extends FleetError {
  readonly code = ErrorCode.RESOURCE_LIMIT;
  constructor(
    readonly toolName: string,
    readonly limit: string,
    detail: string,
    who: ResourceLimitWho = {},
  ) {
    const { by = 'its sandbox', remedy = "lower the work per call or raise the pool's sandbox limit" } = who;
    super(`tool '${toolName}' was stopped by ${by}: ${limit} limit reached (${detail}); ${remedy}`, { toolName, limit, detail });
  }
}

/**
 * A call was submitted as speculative (to run ahead of need, its result
 * possibly discarded) for a tool that may not run that way: one not flagged
 * `speculatable`, or one whose call would wait for a person.
 */
export class NotSpeculatableError extends FleetError {
  readonly code = ErrorCode.NOT_SPECULATABLE;
  constructor(
    readonly toolName: string,
    readonly why: string,
  ) {
    super(`tool '${toolName}' cannot be called speculatively: ${why}; submit the call without \`speculative\` when the agent really needs it`, { toolName, why });
  }
}

/** A decision was sent for a call that is not waiting for one: unknown to approvals, already decided, or ended. */
export class NotAwaitingApprovalError extends FleetError {
  readonly code = ErrorCode.NOT_AWAITING_APPROVAL;
  constructor(
    readonly callId: string,
    readonly status: string,
    why: string,
  ) {
    super(`call '${callId}' is not waiting for approval (status: ${status}): ${why}; decisions apply only to calls listed by GET /v1/approvals`, { callId, status });
  }
}

/** What differs between a resubmitted call and the call already recorded under its id. */
export type IdempotencyConflictKind = 'tool' | 'arguments';

/**
 * A call id was resubmitted with a different tool or different arguments than
 * the call already recorded under it. A call id names one call: resubmitting
 * it is answered with that call, so a changed call under the same id would
 * silently get another call's result. Nothing new runs.
 */
export class IdempotencyConflictError extends FleetError {
  readonly code = ErrorCode.IDEMPOTENCY_CONFLICT;
  /**
   * @param callId the id that was resubmitted.
   * @param differs what differs from the recorded call: `tool` when the tool name does (whatever the arguments), else `arguments`.
   */
  constructor(
    readonly callId: string,
    readonly differs: IdempotencyConflictKind,
  ) {
    const other = differs === 'tool' ? 'another tool' : 'other arguments';
    super(
      `call id '${callId}' was already submitted with ${other}; reuse an id only to resubmit the same call, or submit with a new id`,
      { callId, differs },
    );
  }
}

/**
 * An error that crossed a process boundary: the code and details survive, the
 * class does not. Clients receive these.
 */
export class RemoteFleetError extends FleetError {
  constructor(
    readonly code: ErrorCode,
    message: string,
    details: ErrorDetails = {},
  ) {
    super(message, details);
  }
}
