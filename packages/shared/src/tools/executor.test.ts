import { describe, expect, it } from 'vitest';
import type { ToolCall, ToolResult } from './call.js';
import { FnToolExecutor, resultFromOutput, type ToolContext, type ToolExecutor } from './executor.js';

const call: ToolCall = { id: 'c1', name: 'echo', arguments: { a: 1 } };
const ctx: ToolContext = { call, signal: new AbortController().signal, tier: 'platform', attempt: 1, env: {}, trust: 'trusted', progress: () => {} };

describe('executors', () => {
  it('a function executor carries its tool name', () => {
    expect(new FnToolExecutor('echo', (args) => JSON.stringify(args)).name).toBe('echo');
  });

  it('a custom executor class implements the interface', async () => {
    class ClockExecutor implements ToolExecutor {
      readonly name = 'clock';
      execute(c: ToolCall): Promise<ToolResult> {
        return Promise.resolve({ toolCallId: c.id, name: c.name, content: '2026-02-18T12:00:00Z', isError: false });
      }
    }
    const clock = new ClockExecutor();
    const c = { id: 'k', name: 'clock', arguments: {} };
    expect(clock.name).toBe('clock');
    expect((await clock.execute(c)).content).toBe('2026-02-18T12:00:00Z');
  });

  it('a function executor may return a computed value', async () => {
    const add = new FnToolExecutor('add', (args) => String(Number(args.a) + Number(args.b)));
    const c = { id: 'c', name: 'add', arguments: { a: 40, b: 2 } };
    expect((await add.execute(c, { ...ctx, call: c })).content).toBe('42');
  });

  it('turns handler outputs into results', () => {
    expect(resultFromOutput(call, 'text')).toEqual({ toolCallId: 'c1', name: 'echo', content: 'text', isError: false });
    expect(resultFromOutput(call, { ok: true })).toEqual({ toolCallId: 'c1', name: 'echo', content: '{"ok":true}', isError: false, structuredContent: { ok: true } });
    expect(resultFromOutput(call, [1, 2])).toEqual({ toolCallId: 'c1', name: 'echo', content: '[1,2]', isError: false });
    expect(resultFromOutput(call, 7).content).toBe('7');
    expect(resultFromOutput(call, null).content).toBe('null');
    expect(resultFromOutput(call, undefined).content).toBe('');
  });

  it('awaits async handlers and hands them the context', async () => {
    const seen: ToolContext[] = [];
    const exec = new FnToolExecutor('echo', async (_args, c) => {
      seen.push(c);
      await Promise.resolve();
      return { attempt: c.attempt };
    });
    const result = await exec.execute(call, { ...ctx, attempt: 3 });
    expect(result.structuredContent).toEqual({ attempt: 3 });
    expect(seen[0]?.call).toBe(call);
  });
});
