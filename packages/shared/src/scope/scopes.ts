import { RegistryError } from '../errors/errors.js';
import { ToolScope } from './tool-scope.js';

/** A scope together with the name it is known by, for audit entries. */
export interface NamedScope {
  readonly name: string;
  readonly scope: ToolScope;
}

/** The name of the scope used when a caller names no task type. */
export const DEFAULT_SCOPE_NAME = 'default';

/**
 * Named scopes, one per task type (`"research"`, `"billing"`…). A caller
 * names its task type; the registry answers with the scope that task may use.
 */
export class ScopeRegistry {
  readonly #scopes = new Map<string, ToolScope>();
  readonly #default: NamedScope;

  /** @param defaultScope used when no task type is named. @defaultValue `ToolScope.full()` */
  constructor(defaultScope: ToolScope = ToolScope.full()) {
    this.#default = Object.freeze({ name: DEFAULT_SCOPE_NAME, scope: defaultScope });
  }

  /** Registers (or replaces) the scope for a task type. */
  register(taskType: string, scope: ToolScope): this {
    if (taskType.length === 0) throw new RegistryError('a task type needs a non-empty name');
    this.#scopes.set(taskType, scope);
    return this;
  }

  /** The scope for a task type, or `undefined` when it is not registered. */
  get(taskType: string): ToolScope | undefined {
    return this.#scopes.get(taskType);
  }

  has(taskType: string): boolean {
    return this.#scopes.has(taskType);
  }

  /** Registered task types, sorted. */
  taskTypes(): string[] {
    return [...this.#scopes.keys()].sort();
  }

  /** The default scope, used for callers that name no task type. */
  get defaultScope(): NamedScope {
    return this.#default;
  }

  /**
   * Resolves a caller's task type to its scope: no task type gives the default
   * scope; an unknown one gives `undefined`, so the caller can refuse it rather
   * than silently widen or narrow what the task may do.
   */
  resolve(taskType: string | undefined): NamedScope | undefined {
    if (taskType === undefined) return this.#default;
    const scope = this.#scopes.get(taskType);
    return scope === undefined ? undefined : { name: taskType, scope };
  }
}
