import { z } from 'zod';
import { InvalidDefinitionError, InvalidTierError } from '../errors/errors.js';
import { compileSchema } from '../schema/compile.js';
import { emptyObjectSchema, JsonSchema } from '../schema/json-schema.js';
import { TierInput } from '../tiers/tier.js';
import { pointerSegment } from '../wire/json-pointer.js';
import { ToolName } from './call.js';

/** Host worker pools are named like queues: no `:` (BullMQ) and no `.` (our separator). */
export const PoolName = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'must be 1-64 characters of letters, digits, "_" or "-"');
export type PoolName = z.infer<typeof PoolName>;

/**
 * Who a sandbox process may serve (docs/sandbox.md, "Who shares a process").
 * `caller`: calls of one caller (token subject) only, for the process's life;
 * `call`: exactly one call, after which the process is killed — for tools that
 * run untrusted code, where even one caller's calls must not see each other.
 */
export const ProcessIsolation = z.enum(['caller', 'call']);
export type ProcessIsolation = z.infer<typeof ProcessIsolation>;

/** Longest timeout a tool may declare: one day. Longer work belongs in a workflow engine. */
export const MAX_TIMEOUT_MS = 24 * 60 * 60 * 1000;

const fields = {
  name: ToolName,
  /** A name for people (MCP's `title`); clients show it instead of `name`. */
  title: z.string().max(256).optional(),
  /** Shown to the model. @defaultValue `''` */
  description: z.string().default(''),
  /** JSON Schema of the arguments (draft 2020-12 unless `$schema` says draft-07). @defaultValue an empty object schema */
  parameters: JsonSchema.default(emptyObjectSchema),
  /** @defaultValue `'host'`: the most restrictive tier, so forgetting it never widens what a tool may do. */
  tier: TierInput.default('host'),
  /** JSON Schema of `structuredContent`, checked after the handler returns. */
  outputSchema: JsonSchema.optional(),
  /** Safe to run again after a transient failure. @defaultValue false */
  retryable: z.boolean().default(false),
  /** Safe to start before the model has finished its response (no side effects). @defaultValue false */
  speculatable: z.boolean().default(false),
  /** A person must confirm each call before it runs. @defaultValue false */
  requiresConfirmation: z.boolean().default(false),
  /** The handler's signal fires after this many milliseconds. */
  timeoutMs: z.number().int().positive().max(MAX_TIMEOUT_MS).optional(),
  /**
   * How long a call of this tool waits for a person before it ends unapproved,
   * where the dispatcher's policy names no deadline for the tool itself (a
   * policy entry for the tool or a pattern matching it wins; this wins over the
   * policy's default). An MCP servers file sets it per tool.
   */
  approvalDeadlineMs: z.number().int().positive().max(MAX_TIMEOUT_MS).optional(),
  /**
   * MCP tool annotations (`readOnlyHint`, `destructiveHint`…), passed on to
   * clients as the server gave them. Hints only: the fleet decides nothing on
   * them (see trustedSettings in the worker's mcp-servers).
   */
  annotations: z.record(z.string(), z.unknown()).optional(),
  /** Host tools only: the host worker pool that serves this tool. */
  pool: PoolName.optional(),
  /**
   * Platform and Embedded tools only: `call` runs each call of this tool in a
   * sandbox process of its own, killed after it. A tool can only tighten the
   * worker's `--sandbox-isolation`, never loosen it.
   * @defaultValue the worker's `--sandbox-isolation` (`caller` unless set)
   */
  sandboxIsolation: ProcessIsolation.optional(),
};

/**
 * The serialisable description of a tool: what a model is shown and what the
 * dispatcher validates against. Decoding ignores unknown fields so that an
 * older dispatcher still reads definitions from a newer worker.
 */
export const ToolDefinition = z.object(fields);
export type ToolDefinition = z.infer<typeof ToolDefinition>;
/** What a person writes: every field but `name` has a default. */
export type ToolDefinitionInput = z.input<typeof ToolDefinition>;

// Authors' typos (`requireConfirmation`) must fail loudly, not be dropped.
const StrictToolDefinition = z.strictObject(fields);

function pointer(path: readonly PropertyKey[]): string {
  return path.map((p) => `/${pointerSegment(String(p))}`).join('');
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}

/**
 * Compiles a definition's schemas (a cache hit once they compiled anywhere in
 * this process) and tries each validator, so what cannot be compiled and run
 * safely — a schema ajv cannot resolve, or one whose validator overflows its
 * stack — is refused when the tool is defined, not at its first call. The one
 * check of both schemas: {@link parseToolDefinition} and the registry use it.
 *
 * @throws InvalidDefinitionError with the JSON Pointer of the offending part of the schema and what to change.
 */
export function assertSchemasCompile(def: Pick<ToolDefinition, 'name' | 'parameters'> & { readonly outputSchema?: JsonSchema | undefined }): void {
  for (const key of ['parameters', 'outputSchema'] as const) {
    const schema = def[key];
    if (schema === undefined) continue;
    const compiled = compileSchema(schema);
    if (!compiled.ok) {
      throw new InvalidDefinitionError({ toolName: def.name, path: `/${key}${compiled.problem.path}`, reason: compiled.problem.reason });
    }
  }
}

/**
 * Checks and normalises a definition: name, flags, both JSON Schemas (compiled
 * once here, so a bad schema fails at definition time, not at the first call),
 * and the tier rules. Returns a deep-frozen copy.
 *
 * @throws InvalidDefinitionError with the JSON Pointer of the offending field.
 * @throws InvalidTierError when `pool` is set on a tool that is not host-tier.
 */
export function parseToolDefinition(input: unknown, options: { strict?: boolean } = {}): ToolDefinition {
  const nameHint = typeof input === 'object' && input !== null && typeof (input as { name?: unknown }).name === 'string' ? (input as { name: string }).name : undefined;
  const parsed = (options.strict === false ? ToolDefinition : StrictToolDefinition).safeParse(input);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const unknownKeys = issue?.code === 'unrecognized_keys' ? ` (${issue.keys.join(', ')})` : '';
    throw new InvalidDefinitionError({
      toolName: nameHint,
      path: pointer(issue?.path ?? []),
      reason: `${issue?.message ?? 'invalid'}${unknownKeys}`,
      cause: parsed.error,
    });
  }
  // A private copy: freezing must not reach into objects the author still holds.
  const def = JSON.parse(JSON.stringify(parsed.data)) as ToolDefinition;

  if (def.parameters.type !== 'object') {
    throw new InvalidDefinitionError({
      toolName: def.name,
      path: '/parameters/type',
      reason: `the parameters schema must describe a JSON object (type: "object"), got ${JSON.stringify(def.parameters.type ?? null)}; tool arguments are always an object`,
    });
  }
  assertSchemasCompile({ name: def.name, parameters: deepFreeze(def.parameters), outputSchema: def.outputSchema === undefined ? undefined : deepFreeze(def.outputSchema) });
  if (def.pool !== undefined && def.tier !== 'host') {
    throw new InvalidTierError({
      toolName: def.name,
      expected: 'host',
      actual: def.tier,
      hint: `only host-tier tools run on named worker pools; remove pool "${def.pool}" or set tier: "host"`,
    });
  }
  if (def.sandboxIsolation !== undefined && def.tier === 'host') {
    throw new InvalidDefinitionError({
      toolName: def.name,
      path: '/sandboxIsolation',
      reason: 'host-tier tools never run in a sandbox (their isolation is a node of their own); remove sandboxIsolation or choose tier "platform"',
    });
  }
  return deepFreeze(def);
}
