import { RegistryError, ToolNotFoundError } from '../errors/errors.js';
import { assertSchemasCompile, type ToolDefinition } from './definition.js';
import type { ToolExecutor } from './executor.js';
import { assertExecutorMatches, type Tool } from './tool.js';

/** A registered tool: unlike {@link Tool}, its executor is always present. */
export interface RegisteredTool {
  readonly definition: ToolDefinition;
  readonly executor: ToolExecutor;
}

/**
 * Maps tool names to their definitions and executors. Lookups are O(1);
 * listings are sorted by name, so every process lists the same tools in the
 * same order whatever order they were registered in. Call {@link freeze} once
 * start-up is done: tools are fixed for the life of the process after that.
 */
export class ToolRegistry {
  readonly #tools = new Map<string, RegisteredTool>();
  #sorted: readonly ToolDefinition[] | undefined;
  #frozen = false;

  /**
   * Adds a tool.
   * @throws RegistryError when the name is taken, the tool has no executor, or the registry is frozen.
   * @throws InvalidDefinitionError when a schema of the tool cannot be compiled and run safely (a definition built by hand, not by `defineTool`).
   */
  register(tool: Tool): this {
    const name = tool.definition.name;
    this.#assertOpen(`register tool '${name}'`);
    assertSchemasCompile(tool.definition);
    if (this.#tools.has(name)) {
      throw new RegistryError(`a tool named '${name}' is already registered; give the new tool another name or remove the old one first`, { toolName: name });
    }
    if (tool.executor === undefined) {
      throw new RegistryError(`tool '${name}' has no executor; attach one with .handler(fn) or .executor(obj) before registering`, { toolName: name });
    }
    assertExecutorMatches(tool.definition, tool.executor);
    this.#tools.set(name, Object.freeze({ definition: tool.definition, executor: tool.executor }));
    this.#sorted = undefined;
    return this;
  }

  /** Adds several tools; stops at the first one refused (the ones before it stay registered). */
  registerAll(tools: Iterable<Tool>): this {
    for (const tool of tools) this.register(tool);
    return this;
  }

  /** The tool with this name, or `undefined`. */
  get(name: string): RegisteredTool | undefined {
    return this.#tools.get(name);
  }

  /**
   * The tool with this name.
   * @throws ToolNotFoundError naming the tools that do exist.
   */
  require(name: string): RegisteredTool {
    const tool = this.#tools.get(name);
    if (tool === undefined) throw new ToolNotFoundError(name, { known: this.names() });
    return tool;
  }

  has(name: string): boolean {
    return this.#tools.has(name);
  }

  /** Definitions of every tool, sorted by name. */
  list(): readonly ToolDefinition[] {
    this.#sorted ??= Object.freeze([...this.#tools.values()].map((t) => t.definition).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)));
    return this.#sorted;
  }

  /** Names of every tool, sorted. */
  names(): string[] {
    return this.list().map((d) => d.name);
  }

  /** Plain, mutable copies of every definition, sorted by name: ready to serialise for a model. */
  definitions(): ToolDefinition[] {
    return this.list().map((d) => JSON.parse(JSON.stringify(d)) as ToolDefinition);
  }

  get size(): number {
    return this.#tools.size;
  }

  isEmpty(): boolean {
    return this.#tools.size === 0;
  }

  /**
   * Removes a tool and returns it, or `undefined` when there was none.
   * @throws RegistryError when the registry is frozen.
   */
  remove(name: string): RegisteredTool | undefined {
    this.#assertOpen(`remove tool '${name}'`);
    const tool = this.#tools.get(name);
    if (tool !== undefined) {
      this.#tools.delete(name);
      this.#sorted = undefined;
    }
    return tool;
  }

  /** Fixes the set of tools: later `register` and `remove` calls fail. */
  freeze(): this {
    this.#frozen = true;
    return this;
  }

  get isFrozen(): boolean {
    return this.#frozen;
  }

  #assertOpen(action: string): void {
    if (this.#frozen) {
      throw new RegistryError(`cannot ${action}: the registry was frozen after initialisation; register every tool before calling freeze()`);
    }
  }
}
