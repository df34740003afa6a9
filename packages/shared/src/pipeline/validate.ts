import { SchemaValidationError, type ValidationStage } from '../errors/errors.js';
import { compileSchema } from '../schema/compile.js';
import { isJsonObject, jsonTypeOf } from '../schema/json-schema.js';
import type { ToolDefinition } from '../tools/definition.js';

/**
 * Checks arguments against the tool's parameters schema (compiled once per
 * definition and cached).
 *
 * @throws SchemaValidationError with the JSON Pointer of the first failing field and every issue.
 */
export function validateArguments(definition: ToolDefinition, args: unknown, stage: ValidationStage = 'arguments', remedy?: string): asserts args is Record<string, unknown> {
  if (!isJsonObject(args)) {
    throw new SchemaValidationError({
      toolName: definition.name,
      stage,
      issues: [{ path: '', reason: `arguments must be a JSON object, got ${jsonTypeOf(args)}`, keyword: 'type' }],
      ...(remedy === undefined ? {} : { remedy }),
    });
  }
  const compiled = compileSchema(definition.parameters);
  // Definitions are checked when they are made; reaching this means one was built around parseToolDefinition.
  if (!compiled.ok) throw new SchemaValidationError({ toolName: definition.name, stage, issues: [{ ...compiled.problem, keyword: '$schema' }], ...(remedy === undefined ? {} : { remedy }) });
  const [first, ...rest] = compiled.validate(args);
  if (first !== undefined) throw new SchemaValidationError({ toolName: definition.name, stage, issues: [first, ...rest], ...(remedy === undefined ? {} : { remedy }) });
}
