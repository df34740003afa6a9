import type { ApprovalHandler } from '../approval/decision.js';
import { InternalError } from '../errors/errors.js';
import { type FleetError, isFleetError } from '../errors/fleet-error.js';
import { type MalformedToolBlockError } from '../errors/errors.js';
import { parseToolCalls, type ParseOptions } from '../model-text/parse.js';
import type { AuditLogger } from '../scope/audit.js';
import type { RiskSignalQueue } from '../scope/risk.js';
import { DEFAULT_SCOPE_NAME, type NamedScope } from '../scope/scopes.js';
import { ToolScope } from '../scope/tool-scope.js';
import type { TrustLevel } from '../scope/trust.js';
import type { ToolCall } from '../tools/call.js';
import type { ToolDefinition } from '../tools/definition.js';
import type { ToolRegistry } from '../tools/registry.js';
import { type CallContext, executeToolCall, type ToolCallOutcome } from './execute.js';

/** One call found in a model's text, and how it ended. */
export type ModelTextCallOutcome =
  | { readonly call: ToolCall; readonly ok: true; readonly outcome: ToolCallOutcome }
  | { readonly call: ToolCall; readonly ok: false; readonly error: FleetError };

/** Everything that came of running a model's text. */
export interface ModelTextOutcome {
  readonly calls: ModelTextCallOutcome[];
  /** Malformed `tool_call` blocks; the well-formed ones around them still ran. */
  readonly errors: MalformedToolBlockError[];
}

export interface ScopedToolExecutorOptions {
  readonly registry: ToolRegistry;
  readonly approval: ApprovalHandler;
  /** @defaultValue `ToolScope.full()`, named `"default"` */
  readonly initialScope?: ToolScope;
  readonly audit?: AuditLogger;
  readonly risk?: RiskSignalQueue;
  /** How ids are made for tool blocks that carry none. */
  readonly parse?: ParseOptions;
}

/**
 * An agent-side executor that enforces a capability scope on both what the
 * model is shown (listing) and what it may run (dispatch). Named scopes are
 * registered per task type and switched as the agent moves between tasks.
 *
 * It holds per-agent state (active scope, skill env, trust), so use one per
 * agent session; the stateless {@link executeToolCall} serves shared servers.
 */
export class ScopedToolExecutor {
  readonly #registry: ToolRegistry;
  readonly #approval: ApprovalHandler;
  readonly #scopes = new Map<string, ToolScope>();
  readonly #parse: ParseOptions;
  #audit: AuditLogger | undefined;
  #risk: RiskSignalQueue | undefined;
  #active: NamedScope;
  #scopeAtListing: string | null = null;
  #env: Readonly<Record<string, string>> = {};
  #trust: TrustLevel = 'trusted';

  constructor(options: ScopedToolExecutorOptions) {
    this.#registry = options.registry;
    this.#approval = options.approval;
    this.#audit = options.audit;
    this.#risk = options.risk;
    this.#parse = options.parse ?? {};
    this.#active = { name: DEFAULT_SCOPE_NAME, scope: options.initialScope ?? ToolScope.full() };
  }

  /** Every out-of-scope rejection writes an entry here. */
  withAudit(audit: AuditLogger): this {
    this.#audit = audit;
    return this;
  }

  /** Every out-of-scope rejection pushes a risk signal here. */
  withSignalQueue(queue: RiskSignalQueue): this {
    this.#risk = queue;
    return this;
  }

  /** Registers a named scope for {@link setScopeForTask}. */
  registerScope(name: string, scope: ToolScope): this {
    this.#scopes.set(name, scope);
    return this;
  }

  /** Switches to the scope registered for a task type. Returns false (and changes nothing) for an unknown one. */
  setScopeForTask(taskType: string): boolean {
    const scope = this.#scopes.get(taskType);
    if (scope === undefined) return false;
    this.#active = { name: taskType, scope };
    return true;
  }

  /** Replaces the active scope directly. @param name recorded in audit entries. @defaultValue `"custom"` */
  setScope(scope: ToolScope, name = 'custom'): void {
    this.#active = { name, scope };
  }

  /** Names of the registered tools that a task type's scope admits, or `undefined` for an unknown task type. */
  scopeForTask(taskType: string): string[] | undefined {
    const scope = this.#scopes.get(taskType);
    return scope === undefined ? undefined : this.#registry.names().filter((name) => scope.admits(name));
  }

  /** Name of the scope that was active at the last {@link toolDefinitions} call, or `null` before any. */
  get scopeAtListingName(): string | null {
    return this.#scopeAtListing;
  }

  /** Name of the active scope. */
  get activeScopeName(): string {
    return this.#active.name;
  }

  /** The definitions the model may see under the active scope; remembers that scope's name for audit. */
  toolDefinitions(): ToolDefinition[] {
    this.#scopeAtListing = this.#active.name;
    return this.#active.scope.filter(this.#registry.definitions());
  }

  /** Runs one call; out-of-scope calls are rejected before any side effect. */
  executeToolCall(call: ToolCall, ctx: CallContext = {}): Promise<ToolCallOutcome> {
    return this.#run(call, ctx, false);
  }

  /** Runs a call a person has confirmed: the confirmation gate is skipped; scope, schema and denials still apply. */
  executeToolCallConfirmed(call: ToolCall, ctx: CallContext = {}): Promise<ToolCallOutcome> {
    return this.#run(call, ctx, true);
  }

  /** Parses a model's response for `tool_call` blocks and runs each, in order. */
  execute(response: string, ctx: CallContext = {}): Promise<ModelTextOutcome> {
    return this.#runText(response, ctx, false);
  }

  /** As {@link execute}, for a response whose calls a person has confirmed. */
  executeConfirmed(response: string, ctx: CallContext = {}): Promise<ModelTextOutcome> {
    return this.#runText(response, ctx, true);
  }

  /** Sets the environment variables of the active skill (passed to handlers); `undefined` clears them. */
  setSkillEnv(env: Readonly<Record<string, string>> | undefined): void {
    this.#env = Object.freeze({ ...env });
  }

  /** Sets the trust level of the active skill. */
  setEffectiveTrust(level: TrustLevel): void {
    this.#trust = level;
  }

  get effectiveTrust(): TrustLevel {
    return this.#trust;
  }

  /** Whether a call to this tool may be retried after a transient failure (false for unknown tools). */
  isToolRetryable(toolName: string): boolean {
    return this.#registry.get(toolName)?.definition.retryable ?? false;
  }

  /** Whether a call to this tool may start before the model finishes its response (false for unknown tools). */
  isToolSpeculatable(toolName: string): boolean {
    return this.#registry.get(toolName)?.definition.speculatable ?? false;
  }

  /** Whether this call needs a person's confirmation before it runs. */
  requiresConfirmation(call: ToolCall): boolean {
    return this.#registry.get(call.name)?.definition.requiresConfirmation ?? false;
  }

  #run(call: ToolCall, ctx: CallContext, confirmed: boolean): Promise<ToolCallOutcome> {
    return executeToolCall(call, {
      registry: this.#registry,
      approval: this.#approval,
      scope: this.#active,
      scopeAtListing: this.#scopeAtListing,
      audit: this.#audit,
      risk: this.#risk,
      confirmed,
      ctx: { env: this.#env, trust: this.#trust, ...ctx },
    });
  }

  async #runText(response: string, ctx: CallContext, confirmed: boolean): Promise<ModelTextOutcome> {
    const parsed = parseToolCalls(response, this.#parse);
    const calls: ModelTextCallOutcome[] = [];
    for (const call of parsed.calls) {
      try {
        calls.push({ call, ok: true, outcome: await this.#run(call, ctx, confirmed) });
      } catch (error) {
        calls.push({ call, ok: false, error: isFleetError(error) ? error : new InternalError(String(error), { cause: error }) });
      }
    }
    return { calls, errors: parsed.errors };
  }
}
