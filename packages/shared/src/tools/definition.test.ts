import { describe, expect, it } from 'vitest';
import { ErrorCode } from '../errors/codes.js';
import { type FleetError, isFleetError } from '../errors/fleet-error.js';
import type { ToolCall } from './call.js';
import { FnToolExecutor, type ToolContext } from './executor.js';
import { parseToolDefinition } from './definition.js';
import { defineTool, ToolBuilder } from './tool.js';

function catchError(fn: () => unknown): FleetError {
  try {
    fn();
  } catch (error) {
    if (isFleetError(error)) return error;
    throw error;
  }
  throw new Error('expected a FleetError, nothing was thrown');
}

const ctx = (call: ToolCall): ToolContext => ({ call, signal: new AbortController().signal, tier: 'platform', attempt: 1, env: {}, trust: 'trusted', progress: () => {} });

describe('ToolBuilder', () => {
  it('builds a definition without an executor', () => {
    const { definition, executor } = new ToolBuilder('clock').description('Returns the current UTC time').tier('platform').build();
    expect(definition.name).toBe('clock');
    expect(executor).toBeUndefined();
  });

  it('starts from the defaults: empty description, host tier, empty object schema, no executor', () => {
    const { definition, executor } = new ToolBuilder('my_tool').build();
    expect(definition.name).toBe('my_tool');
    expect(definition.description).toBe('');
    expect(definition.tier).toBe('host');
    expect(definition.parameters).toEqual({ type: 'object', properties: {} });
    expect(definition.retryable).toBe(false);
    expect(definition.speculatable).toBe(false);
    expect(definition.requiresConfirmation).toBe(false);
    expect(executor).toBeUndefined();
  });

  it('sets the description shown to the model', () => {
    const { definition } = new ToolBuilder('search').description('Search the web for information').build();
    expect(definition.description).toBe('Search the web for information');
  });

  it('sets the tier', () => {
    expect(new ToolBuilder('clock').tier('platform').build().definition.tier).toBe('platform');
  });

  it('accepts "external" as the host tier', () => {
    expect(new ToolBuilder('web').tier('external').build().definition.tier).toBe('host');
  });

  it('sets the parameters schema', () => {
    const schema = { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] };
    const { definition } = new ToolBuilder('greet').parameters(schema).build();
    expect(definition.parameters).toEqual(schema);
  });

  it('attaches an executor object', async () => {
    const exec = new FnToolExecutor('echo', (args) => JSON.stringify(args));
    const { executor } = new ToolBuilder('echo').executor(exec).build();
    expect(executor).toBe(exec);
    const call = { id: 'c1', name: 'echo', arguments: { a: 1 } };
    expect((await executor!.execute(call, ctx(call))).content).toBe('{"a":1}');
  });

  it('attaches a plain function as the executor', async () => {
    const { executor } = new ToolBuilder('echo').handler((args) => JSON.stringify(args)).build();
    expect(executor?.name).toBe('echo');
    const call = { id: 'c2', name: 'echo', arguments: { x: 'y' } };
    expect(await executor!.execute(call, ctx(call))).toEqual({ toolCallId: 'c2', name: 'echo', content: '{"x":"y"}', isError: false });
  });

  it('sets every flag', () => {
    const { definition } = new ToolBuilder('pay').tier('host').pool('payments').retryable().speculatable().requiresConfirmation().timeoutMs(5000).build();
    expect(definition).toMatchObject({ tier: 'host', pool: 'payments', retryable: true, speculatable: true, requiresConfirmation: true, timeoutMs: 5000 });
  });

  it('refuses an executor with another tool name', () => {
    const error = catchError(() => new ToolBuilder('a').executor(new FnToolExecutor('b', () => '')).build());
    expect(error.code).toBe(ErrorCode.REGISTRY_ERROR);
    expect(error.message).toContain("'b'");
  });
});

describe('defineTool', () => {
  it('applies the same defaults as the builder', () => {
    const fromObject = defineTool({ name: 'x' }).definition;
    const fromBuilder = new ToolBuilder('x').build().definition;
    expect(fromObject).toEqual(fromBuilder);
  });

  it('keeps an outputSchema and makes an executor from the handler', () => {
    const tool = defineTool({ name: 'sum', tier: 'embedded', outputSchema: { type: 'object' }, handler: () => ({ total: 3 }) });
    expect(tool.definition.outputSchema).toEqual({ type: 'object' });
    expect(tool.executor?.name).toBe('sum');
  });

  it.each([
    ['', 'empty'],
    ['has space', 'space'],
    ['slash/name', 'slash'],
    ['x'.repeat(129), 'too long'],
    ['ünïcode', 'non-ASCII'],
  ])('rejects the name %j (%s) with INVALID_DEFINITION at /name', (name) => {
    const error = catchError(() => defineTool({ name }));
    expect(error.code).toBe(ErrorCode.INVALID_DEFINITION);
    expect(error.details.path).toBe('/name');
  });

  it('accepts every MCP-valid name character and 128 characters', () => {
    expect(defineTool({ name: 'a.B-c_9' }).definition.name).toBe('a.B-c_9');
    expect(defineTool({ name: 'n'.repeat(128) }).definition.name).toHaveLength(128);
  });

  it('rejects an invalid JSON Schema when the tool is defined, naming the schema path', () => {
    const error = catchError(() => defineTool({ name: 'bad', parameters: { type: 'object', properties: { n: { type: 'strng' } } } }));
    expect(error.code).toBe(ErrorCode.INVALID_DEFINITION);
    expect(error.details.path).toBe('/parameters/properties/n/type');
    expect(error.message).toContain("tool 'bad'");
    expect(error.message).toContain('/parameters/properties/n/type');
  });

  it('requires the parameters schema to describe an object', () => {
    const error = catchError(() => defineTool({ name: 'arr', parameters: { type: 'array' } }));
    expect(error.code).toBe(ErrorCode.INVALID_DEFINITION);
    expect(error.details.path).toBe('/parameters/type');
  });

  it('accepts draft-07 schemas and rejects unknown dialects', () => {
    const draft7 = defineTool({ name: 'd7', parameters: { $schema: 'http://json-schema.org/draft-07/schema#', type: 'object', definitions: { a: { type: 'string' } } } });
    expect(draft7.definition.parameters.$schema).toBe('http://json-schema.org/draft-07/schema#');
    const error = catchError(() => defineTool({ name: 'd4', parameters: { $schema: 'http://json-schema.org/draft-04/schema#', type: 'object' } }));
    expect(error.details.path).toBe('/parameters/$schema');
  });

  it('rejects an invalid outputSchema with its path', () => {
    const error = catchError(() => defineTool({ name: 'o', outputSchema: { type: 'object', minProperties: -1 } }));
    expect(error.details.path).toBe('/outputSchema/minProperties');
  });

  it('rejects misspelt fields instead of dropping them', () => {
    const error = catchError(() => defineTool({ name: 't', requireConfirmation: true } as never));
    expect(error.code).toBe(ErrorCode.INVALID_DEFINITION);
    expect(error.message).toContain('requireConfirmation');
  });

  it('rejects a pool on a non-host tool with INVALID_TIER (expected host)', () => {
    const error = catchError(() => defineTool({ name: 'p', tier: 'platform', pool: 'payments' }));
    expect(error.code).toBe(ErrorCode.INVALID_TIER);
    expect(error.details).toMatchObject({ expected: 'host', actual: 'platform' });
  });

  it('keeps a sandboxed tool\'s sandboxIsolation and refuses it on host tools, where nothing is sandboxed', () => {
    expect(defineTool({ name: 'u', tier: 'platform', sandboxIsolation: 'call' }).definition.sandboxIsolation).toBe('call');
    expect(defineTool({ name: 'v', tier: 'embedded' }).definition.sandboxIsolation).toBeUndefined();
    expect(catchError(() => defineTool({ name: 'w', tier: 'platform', sandboxIsolation: 'process' as 'call' })).details.path).toBe('/sandboxIsolation');
    const onHost = catchError(() => defineTool({ name: 'h', tier: 'host', sandboxIsolation: 'call' }));
    expect(onHost.code).toBe(ErrorCode.INVALID_DEFINITION);
    expect(onHost.details.path).toBe('/sandboxIsolation');
  });

  it('rejects pool names that cannot name a queue', () => {
    expect(catchError(() => defineTool({ name: 'p', pool: 'a:b' })).details.path).toBe('/pool');
  });

  it('rejects a non-positive timeout', () => {
    expect(catchError(() => defineTool({ name: 't', timeoutMs: 0 })).details.path).toBe('/timeoutMs');
  });

  it('freezes the definition without freezing the objects the author passed in', () => {
    const parameters = { type: 'object', properties: { a: { type: 'string' } } };
    const { definition } = defineTool({ name: 'f', parameters });
    expect(Object.isFrozen(definition.parameters)).toBe(true);
    expect(Object.isFrozen(parameters)).toBe(false);
    expect(Object.isFrozen(parameters.properties)).toBe(false);
  });

  it('refuses a handler and an executor together', () => {
    const error = catchError(() => defineTool({ name: 'h', handler: () => '', executor: new FnToolExecutor('h', () => '') }));
    expect(error.code).toBe(ErrorCode.REGISTRY_ERROR);
  });
});

describe('parseToolDefinition and schemas', () => {
  // JSON-Schema-Test-Suite, draft2020-12 dynamicRef.json "$dynamicRef avoids the root of each schema, but scopes are
  // still registered", made a tool's parameters: valid 2020-12 whose validator (ajv) recurses until the stack overflows.
  const overflowing = {
    $schema: 'https://json-schema.org/draft/2020-12/schema',
    $id: 'https://test.json-schema.org/dynamic-ref-avoids-root-of-each-schema/base',
    type: 'object',
    $ref: 'first#/$defs/stuff',
    $defs: {
      first: { $id: 'first', $defs: { stuff: { $ref: 'second#/$defs/stuff' }, length: { maxLength: 1 } } },
      second: { $id: 'second', $defs: { stuff: { $ref: 'third#/$defs/stuff' }, length: { $dynamicAnchor: 'length', maxLength: 2 } } },
      third: { $id: 'third', $defs: { stuff: { $dynamicRef: '#length' }, length: { $dynamicAnchor: 'length', maxLength: 3 } } },
    },
  };

  it('refuses at definition a schema whose validator follows its refs without end, saying what in it to change', () => {
    const error = catchError(() => defineTool({ name: 'loops', parameters: overflowing, handler: () => 'never' }));
    expect(error.code).toBe(ErrorCode.INVALID_DEFINITION);
    expect(error.message).toMatch(/'\/parameters\/\$defs\/third\/\$defs\/stuff\/\$dynamicRef'.*follows its \$refs without end.*replace a \$dynamicRef with a plain \$ref/);
  });

  it('parses a tool whose parameters have a root $id again and again (the worker re-checks each definition a module made)', () => {
    const tool = defineTool({ name: 'with_id', parameters: { $id: 'https://tools.example/with_id', type: 'object', properties: { q: { type: 'string' } } }, handler: () => 'ok' });
    const again = parseToolDefinition(JSON.parse(JSON.stringify(tool.definition)), { strict: false });
    expect(again.parameters.$id).toBe('https://tools.example/with_id');
  });
});
