import type { ApprovalDecision, ApprovalHandler, Authorization } from '../approval/decision.js';
import { ApprovalDeniedError, ApprovalPendingError, OutOfScopeError } from '../errors/errors.js';
import type { AuditLogger } from '../scope/audit.js';
import type { RiskSignalQueue } from '../scope/risk.js';
import type { NamedScope } from '../scope/scopes.js';
import { ToolScope } from '../scope/tool-scope.js';
import type { TrustLevel } from '../scope/trust.js';
import type { ToolCall, ToolResult } from '../tools/call.js';
import type { ToolDefinition } from '../tools/definition.js';
import type { CallProgress } from '../tools/progress.js';
import type { ToolRegistry } from '../tools/registry.js';
import { runExecutor } from './run.js';
import { validateArguments } from './validate.js';

/** Who is calling and under what conditions. */
export interface CallContext {
  /** Cancels the call while it runs. */
  readonly signal?: AbortSignal | undefined;
  /** Presented by the caller; host-tier approval looks for a grant in it. */
  readonly authorization?: Authorization | undefined;
  /** Who is calling (agent id, token subject), for audit. */
  readonly caller?: string | undefined;
  /** @defaultValue `'trusted'` */
  readonly trust?: TrustLevel | undefined;
  /** Environment variables of the active skill, passed to the handler. @defaultValue `{}` */
  readonly env?: Readonly<Record<string, string>> | undefined;
  /** @defaultValue 1 */
  readonly attempt?: number | undefined;
  /** Hears the handler's progress reports while the call runs. */
  readonly onProgress?: ((progress: CallProgress) => void) | undefined;
}

/** Everything the pipeline needs besides the call. */
export interface PipelineOptions {
  readonly registry: ToolRegistry;
  /** The mandatory approval step. */
  readonly approval: ApprovalHandler;
  /** The caller's active scope. @defaultValue the full scope, named `"full"` */
  readonly scope?: NamedScope | undefined;
  /** The scope the caller listed tools under, for audit. @defaultValue `null` (never listed) */
  readonly scopeAtListing?: string | null | undefined;
  /** Receives an entry for every out-of-scope call. */
  readonly audit?: AuditLogger | undefined;
  /** Receives a risk signal for every out-of-scope call. */
  readonly risk?: RiskSignalQueue | undefined;
  readonly ctx?: CallContext | undefined;
  /**
   * A person already confirmed this call: skip the confirmation gate and treat
   * an approval handler's `pending` as decided. Scope, schema and denials still apply.
   * @defaultValue false
   */
  readonly confirmed?: boolean | undefined;
}

/** How a call ended, or where it waits. A failed tool is `failed` with an error result, not a rejection. */
export type ToolCallOutcome =
  | { readonly status: 'completed' | 'failed'; readonly result: ToolResult }
  | {
      readonly status: 'awaiting_approval';
      /** The call as it would run once approved (approval may have modified its arguments). */
      readonly call: ToolCall;
      readonly reason: string;
      /** `confirmation`: the tool requires confirmation of each call; `approval`: the approval handler asked for a person. */
      readonly waitingFor: 'approval' | 'confirmation';
    };

const FULL_SCOPE: NamedScope = Object.freeze({ name: 'full', scope: ToolScope.full() });

/**
 * Rejects a call outside the active scope before anything else happens, and
 * leaves a trace of it. Audit and risk sinks cannot un-reject the call: their
 * failures are swallowed.
 */
async function enforceScope(call: ToolCall, options: Omit<PipelineOptions, 'registry'>): Promise<void> {
  const active = options.scope ?? FULL_SCOPE;
  if (active.scope.admits(call.name)) return;
  const at = new Date().toISOString();
  const caller = options.ctx?.caller;
  try {
    await options.audit?.record({
      at,
      callId: call.id,
      tool: call.name,
      errorCategory: 'out_of_scope',
      scopeAtListing: options.scopeAtListing ?? null,
      scopeAtDispatch: active.name,
      ...(caller === undefined ? {} : { caller }),
    });
  } catch {
    // An audit sink outage must not turn a rejection into an acceptance or a crash.
  }
  try {
    options.risk?.push({ kind: 'out_of_scope', at, callId: call.id, tool: call.name, scope: active.name, ...(caller === undefined ? {} : { caller }) });
  } catch {
    // Same as above.
  }
  throw new OutOfScopeError(call.name, active.name);
}

async function askApproval(handler: ApprovalHandler, ...args: Parameters<ApprovalHandler['check']>): Promise<ApprovalDecision> {
  try {
    return await handler.check(...args);
  } catch (error) {
    // Fail closed: an approval step that cannot answer has not approved.
    return { kind: 'deny', reason: `the approval handler failed (${error instanceof Error ? error.message : String(error)})` };
  }
}

/** Where {@link admitToolCall} leaves a call. */
export type Admission =
  | {
      readonly status: 'approved';
      readonly call: ToolCall;
      readonly definition: ToolDefinition;
      /** Whether the approval step changed the arguments (the call carries the changed ones). */
      readonly modified: boolean;
    }
  | {
      readonly status: 'awaiting_approval';
      readonly call: ToolCall;
      readonly definition: ToolDefinition;
      readonly reason: string;
      readonly waitingFor: 'approval' | 'confirmation';
    };

/** What {@link admitToolCall} needs: the pipeline options, with definitions from anywhere (a registry, a live catalog). */
export type AdmitOptions = Omit<PipelineOptions, 'registry'> & {
  /**
   * The definition for a tool name.
   * @throws ToolNotFoundError (or another FleetError, e.g. when no worker serves the tool).
   */
  readonly lookup: (name: string) => ToolDefinition;
  /**
   * The entrance's own checks of a call's arguments (a dispatcher's input limits: size, nesting, prototype keys),
   * run on every set of arguments the approval step puts in place of the submitted ones, before the schema sees
   * it — the entrance runs them on the submitted arguments itself, before admission — so arguments a handler
   * substitutes meet every check submitted ones meet, with the same answer.
   * @throws FleetError refusing the arguments: the call is refused with it.
   * @defaultValue no checks besides the schema
   */
  readonly checkArguments?: ((args: Readonly<Record<string, unknown>>) => void) | undefined;
};

/**
 * Every step before execution, in this order:
 * scope → lookup → schema validation → approval (→ re-validation after a modification) → confirmation.
 * The dispatcher runs this and enqueues what it approves; {@link executeToolCall} runs it and executes in-process.
 *
 * @throws OutOfScopeError before any other step when the scope does not admit the tool.
 * @throws ToolNotFoundError, SchemaValidationError, ApprovalDeniedError for calls that must not run.
 */
export async function admitToolCall(call: ToolCall, options: AdmitOptions): Promise<Admission> {
  await enforceScope(call, options);
  const definition = options.lookup(call.name);
  validateArguments(definition, call.arguments);

  const ctx = options.ctx ?? {};
  const decision = await askApproval(options.approval, call, definition.tier, {
    definition,
    authorization: ctx.authorization,
    trust: ctx.trust ?? 'trusted',
    caller: ctx.caller,
  });
  // Arguments the approval step substitutes are checked as submitted ones are: the entrance's checks, then the schema.
  const replaced = (args: Record<string, unknown>): ToolCall => {
    options.checkArguments?.(args);
    validateArguments(definition, args, 'after_modify');
    return { ...call, arguments: args };
  };
  let approved = call;
  switch (decision.kind) {
    case 'deny':
      throw new ApprovalDeniedError(call.name, decision.reason);
    case 'modify':
      approved = replaced(decision.arguments);
      break;
    case 'pending':
      if (decision.arguments !== undefined) approved = replaced(decision.arguments);
      if (options.confirmed !== true) return { status: 'awaiting_approval', call: approved, definition, reason: decision.reason, waitingFor: 'approval' };
      break;
    case 'approve':
      break;
  }
  if (definition.requiresConfirmation && options.confirmed !== true) {
    return {
      status: 'awaiting_approval',
      call: approved,
      definition,
      reason: `tool '${call.name}' requires a person to confirm each call`,
      waitingFor: 'confirmation',
    };
  }
  return { status: 'approved', call: approved, definition, modified: approved !== call };
}

/**
 * Runs one call through the whole pipeline in this process: {@link admitToolCall}, then execution.
 *
 * @returns the result (`completed` / `failed`), or `awaiting_approval` when a person must decide first.
 * @throws OutOfScopeError before any other step when the scope does not admit the tool.
 * @throws ToolNotFoundError, SchemaValidationError, ApprovalDeniedError for calls that must not run.
 */
export async function executeToolCall(call: ToolCall, options: PipelineOptions): Promise<ToolCallOutcome> {
  const admission = await admitToolCall(call, { ...options, lookup: (name) => options.registry.require(name).definition });
  if (admission.status === 'awaiting_approval') {
    const { call: waiting, reason, waitingFor } = admission;
    return { status: 'awaiting_approval', call: waiting, reason, waitingFor };
  }
  const { executor } = options.registry.require(call.name);
  const result = await runExecutor(executor, admission.definition, admission.call, options.ctx ?? {});
  return { status: result.isError ? 'failed' : 'completed', result };
}

/**
 * The result of an outcome, for callers that have no person in the loop.
 * @throws ApprovalPendingError when the call waits for approval.
 */
export function resultOf(outcome: ToolCallOutcome): ToolResult {
  if (outcome.status === 'awaiting_approval') throw new ApprovalPendingError(outcome.call.name, outcome.reason, outcome.call.id);
  return outcome.result;
}
