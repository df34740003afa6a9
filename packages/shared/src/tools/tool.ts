import { RegistryError } from '../errors/errors.js';
import type { JsonSchema } from '../schema/json-schema.js';
import type { TierInput } from '../tiers/tier.js';
import { parseToolDefinition, type ToolDefinition, type ToolDefinitionInput } from './definition.js';
import { FnToolExecutor, type ToolExecutor, type ToolHandler } from './executor.js';

/** A definition and, where this process can run it, its executor. */
export interface Tool {
  readonly definition: ToolDefinition;
  readonly executor: ToolExecutor | undefined;
}

/** @throws RegistryError when the executor serves another tool's name. */
export function assertExecutorMatches(definition: ToolDefinition, executor: ToolExecutor | undefined): void {
  if (executor !== undefined && executor.name !== definition.name) {
    throw new RegistryError(`executor '${executor.name}' cannot serve tool '${definition.name}'; give the executor the tool's name`, {
      toolName: definition.name,
    });
  }
}

/**
 * Defines a tool in one object. Defaults: empty description, tier `host` (the
 * most restrictive), an empty object schema, no executor.
 *
 * @throws InvalidDefinitionError for a bad name, unknown field or invalid JSON Schema (the message has its path).
 * @throws InvalidTierError when `pool` is set on a non-host tool.
 */
export function defineTool(spec: ToolDefinitionInput & { handler?: ToolHandler; executor?: ToolExecutor }): Tool {
  const { handler, executor, ...definitionInput } = spec;
  if (handler !== undefined && executor !== undefined) {
    throw new RegistryError(`tool '${spec.name}' has both a handler and an executor; give it one`);
  }
  const definition = parseToolDefinition(definitionInput);
  const exec = handler === undefined ? executor : new FnToolExecutor(definition.name, handler);
  assertExecutorMatches(definition, exec);
  return Object.freeze({ definition, executor: exec });
}

/**
 * A fluent alternative to {@link defineTool}, with the same defaults. Only the
 * name is required; `build()` checks everything at once.
 *
 * @example
 * const { definition, executor } = new ToolBuilder('clock').description('UTC time').tier('platform').handler(() => new Date().toISOString()).build();
 */
export class ToolBuilder {
  #spec: ToolDefinitionInput;
  #executor: ToolExecutor | undefined;

  constructor(name: string) {
    this.#spec = { name };
  }

  /** The text a model reads to decide when to call the tool. */
  description(description: string): this {
    this.#spec = { ...this.#spec, description };
    return this;
  }

  tier(tier: TierInput): this {
    this.#spec = { ...this.#spec, tier };
    return this;
  }

  /** JSON Schema of the arguments (an object schema). */
  parameters(schema: JsonSchema): this {
    this.#spec = { ...this.#spec, parameters: schema };
    return this;
  }

  outputSchema(schema: JsonSchema): this {
    this.#spec = { ...this.#spec, outputSchema: schema };
    return this;
  }

  retryable(value = true): this {
    this.#spec = { ...this.#spec, retryable: value };
    return this;
  }

  speculatable(value = true): this {
    this.#spec = { ...this.#spec, speculatable: value };
    return this;
  }

  requiresConfirmation(value = true): this {
    this.#spec = { ...this.#spec, requiresConfirmation: value };
    return this;
  }

  timeoutMs(ms: number): this {
    this.#spec = { ...this.#spec, timeoutMs: ms };
    return this;
  }

  /** Host tools only: the named host worker pool that serves the tool. */
  pool(name: string): this {
    this.#spec = { ...this.#spec, pool: name };
    return this;
  }

  /** Attaches an executor object (for tools that keep state, connections…). */
  executor(executor: ToolExecutor): this {
    this.#executor = executor;
    return this;
  }

  /** Attaches a plain function as the executor. */
  handler(handler: ToolHandler): this {
    this.#executor = new FnToolExecutor(this.#spec.name, handler);
    return this;
  }

  /**
   * @throws InvalidDefinitionError / InvalidTierError as {@link defineTool} does.
   */
  build(): Tool {
    return this.#executor === undefined ? defineTool(this.#spec) : defineTool({ ...this.#spec, executor: this.#executor });
  }
}
