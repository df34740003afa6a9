import { describe, expect, it } from 'vitest';
import { ApprovalDeniedError } from '../errors/errors.js';
import type { ToolCall, ToolResult } from '../tools/call.js';
import type { ToolExecutor } from '../tools/executor.js';
import { defineTool, type Tool } from '../tools/tool.js';
import { runExecutor } from './run.js';

const call = (name: string): ToolCall => ({ id: 'c1', name, arguments: {} });

async function run(tool: Tool, options: Parameters<typeof runExecutor>[3] = {}): Promise<ToolResult> {
  return runExecutor(tool.executor!, tool.definition, call(tool.definition.name), options);
}

/** Resolves when the signal fires; the handler then reports why. */
const untilAborted = (signal: AbortSignal): Promise<string> =>
  new Promise((resolve) => signal.addEventListener('abort', () => resolve('aborted'), { once: true }));

describe('runExecutor', () => {
  it('aborts the handler signal at timeoutMs and ends with EXECUTION_TIMEOUT', async () => {
    let sawAbort = false;
    const tool = defineTool({
      name: 'slow',
      tier: 'platform',
      timeoutMs: 20,
      handler: async (_a, ctx) => {
        await untilAborted(ctx.signal);
        sawAbort = true;
        return 'late';
      },
    });
    const result = await run(tool);
    expect(result).toMatchObject({ isError: true, error: { code: 'EXECUTION_TIMEOUT', details: { timeoutMs: 20 } } });
    expect(sawAbort).toBe(true);
  });

  it('answers at the timeout even when the handler ignores its signal', async () => {
    let release: () => void = () => {};
    const tool = defineTool({ name: 'stubborn', tier: 'platform', timeoutMs: 10, handler: () => new Promise<string>((r) => (release = () => r('never used'))) });
    const result = await run(tool);
    expect(result.error?.code).toBe('EXECUTION_TIMEOUT');
    release();
  });

  it('cancels a running call when the caller aborts', async () => {
    const controller = new AbortController();
    let started: () => void = () => {};
    const running = new Promise<void>((r) => (started = r));
    const tool = defineTool({
      name: 'long',
      tier: 'platform',
      handler: async (_a, ctx) => {
        started();
        return untilAborted(ctx.signal);
      },
    });
    const pending = run(tool, { signal: controller.signal });
    await running;
    controller.abort('user pressed stop');
    const result = await pending;
    expect(result.error?.code).toBe('CANCELLED');
    expect(result.content).toContain('user pressed stop');
  });

  it('hands the caller a cancel function that stops the run as an abort would; the first stop wins', async () => {
    let cancel: (reason: unknown) => void = () => {};
    let started: () => void = () => {};
    const running = new Promise<void>((r) => (started = r));
    let handlerSignal: AbortSignal | undefined;
    const tool = defineTool({
      name: 'long',
      tier: 'platform',
      handler: async (_a, ctx) => {
        handlerSignal = ctx.signal;
        started();
        return untilAborted(ctx.signal);
      },
    });
    const pending = run(tool, { onCancellable: (c) => (cancel = c) });
    await running;
    cancel('worker shutting down');
    cancel('second reason, ignored');
    const result = await pending;
    expect(result).toMatchObject({ isError: true, error: { code: 'CANCELLED' } });
    expect(result.content).toContain('worker shutting down');
    expect(result.content).not.toContain('second reason');
    expect(handlerSignal?.aborted).toBe(true);
  });

  it('does not start a call whose signal already fired', async () => {
    let ran = false;
    const tool = defineTool({ name: 'never', tier: 'platform', handler: () => ((ran = true), 'x') });
    const result = await run(tool, { signal: AbortSignal.abort('gone') });
    expect(result.error?.code).toBe('CANCELLED');
    expect(ran).toBe(false);
  });

  it('keeps the code of a FleetError thrown by the handler', async () => {
    const tool = defineTool({
      name: 'strict',
      tier: 'platform',
      handler: () => {
        throw new ApprovalDeniedError('strict', 'downstream refused');
      },
    });
    expect((await run(tool)).error?.code).toBe('APPROVAL_DENIED');
  });

  it('turns a thrown non-Error into EXECUTION_FAILED with its text', async () => {
    const tool = defineTool({
      name: 'weird',
      tier: 'platform',
      handler: () => {
        throw 'plain string'; // eslint-disable-line @typescript-eslint/only-throw-error
      },
    });
    const result = await run(tool);
    expect(result.error?.code).toBe('EXECUTION_FAILED');
    expect(result.content).toContain('plain string');
  });

  it('refuses a malformed result from a custom executor', async () => {
    const bad: ToolExecutor = { name: 'bad', execute: () => Promise.resolve({ nope: true } as unknown as ToolResult) };
    const tool = defineTool({ name: 'bad', tier: 'platform', executor: bad });
    expect((await run(tool)).error?.code).toBe('EXECUTION_FAILED');
  });

  it('stamps the call id and name on a custom executor result', async () => {
    const sloppy: ToolExecutor = { name: 's', execute: () => Promise.resolve({ toolCallId: 'other', name: 'other', content: 'x', isError: false }) };
    const result = await run(defineTool({ name: 's', tier: 'platform', executor: sloppy }));
    expect(result).toMatchObject({ toolCallId: 'c1', name: 's' });
  });

  it('checks structured results against the outputSchema', async () => {
    const outputSchema = { type: 'object', properties: { n: { type: 'number' } }, required: ['n'] };
    const good = defineTool({ name: 'o', tier: 'platform', outputSchema, handler: () => ({ n: 1 }) });
    expect((await run(good)).structuredContent).toEqual({ n: 1 });
    const wrong = defineTool({ name: 'o', tier: 'platform', outputSchema, handler: () => ({ n: 'one' }) });
    expect((await run(wrong)).error).toMatchObject({ code: 'OUTPUT_VALIDATION', details: { path: '/n' } });
    const text = defineTool({ name: 'o', tier: 'platform', outputSchema, handler: () => 'just text' });
    expect((await run(text)).error?.code).toBe('OUTPUT_VALIDATION');
  });
});

describe('runExecutor and the nesting of results', () => {
  /** An object `{ a: { a: … 1 } }` nested `depth` levels deep, built as a server's JSON would arrive (parsed). */
  const nested = (depth: number): Record<string, unknown> => JSON.parse(`${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`) as Record<string, unknown>;
  const returning = (result: Record<string, unknown>): ToolExecutor => ({ name: 'deep', execute: () => Promise.resolve(result as unknown as ToolResult) });
  const definition = defineTool({ name: 'deep', tier: 'host', handler: () => '' }).definition;

  it('refuses a result nested deeper than MAX_RESULT_DEPTH with RESOURCE_LIMIT, naming where, before any hop must write it', async () => {
    // 10,000 levels: JSON.parse takes it, JSON.stringify (the record, the answer) throws a RangeError.
    const result = await runExecutor(returning({ toolCallId: 'x', name: 'deep', content: '', isError: false, structuredContent: nested(10_000) }), definition, call('deep'));
    expect(result.isError).toBe(true);
    expect(result.error).toMatchObject({ code: 'RESOURCE_LIMIT', details: { limit: 'output' } });
    expect(result.content).toMatch(/nests deeper than 256 levels at 'structuredContent\.a\.a/);
    expect(() => JSON.stringify(result)).not.toThrow();
  });

  it('refuses deep nesting in content blocks too (a block\'s _meta), and keeps a result within the limit as it is', async () => {
    const deepBlock = await runExecutor(returning({ toolCallId: 'x', name: 'deep', content: '', isError: false, blocks: [{ type: 'text', text: 'hi', _meta: nested(5_000) }] }), definition, call('deep'));
    expect(deepBlock.error).toMatchObject({ code: 'RESOURCE_LIMIT' });
    expect(deepBlock.content).toContain("at 'blocks[0]._meta.a");
    const fine = await runExecutor(returning({ toolCallId: 'x', name: 'deep', content: '', isError: false, structuredContent: nested(200) }), definition, call('deep'));
    expect(fine.isError).toBe(false);
    expect(JSON.stringify(fine.structuredContent)).toBe(JSON.stringify(nested(200)));
  });

  it("fails an in-process tool's output nested past what JSON.stringify writes the same way, RESOURCE_LIMIT naming where", async () => {
    const tool = defineTool({ name: 'deep', tier: 'host', handler: () => nested(10_000) });
    const result = await run(tool);
    expect(result.error).toMatchObject({ code: 'RESOURCE_LIMIT', details: { limit: 'output' } });
    expect(result.content).toContain("nests deeper than 256 levels at 'structuredContent.a.a");
  });
});
