import { runExecutor, type Tool, type ToolResult } from '@forge-fleet/shared';
import { afterAll, describe, expect, it } from 'vitest';
import { buildFixture } from '../../test/fixtures/wasm/build.js';
import { WasmRunner } from './runner.js';
import { defineWasmTool, type WasmToolSpec } from './wasm-tool.js';

const runner = new WasmRunner({ size: 2 });
afterAll(() => runner.close());

async function tool(fixture: string, spec: Partial<WasmToolSpec> = {}): Promise<Tool> {
  return defineWasmTool({ name: fixture, wasm: await buildFixture(fixture), runner, ...spec });
}

function run(t: Tool, args: Record<string, unknown> = {}, signal?: AbortSignal): Promise<ToolResult> {
  if (t.executor === undefined) throw new Error('no executor');
  return runExecutor(t.executor, t.definition, { id: `call-${Math.random()}`, name: t.definition.name, arguments: args }, { signal });
}

describe('defineWasmTool', () => {
  it('declares an embedded tool whose definition carries the deadline', async () => {
    const t = await tool('loop', { timeoutMs: 1234 });
    expect(t.definition).toMatchObject({ name: 'loop', tier: 'embedded', timeoutMs: 1234 });
  });

  it('refuses a non-positive memory limit', async () => {
    await expect(tool('loop', { memoryLimitMb: 0 })).rejects.toMatchObject({ code: 'INVALID_DEFINITION' });
  });
});

describe('WasmToolExecutor', () => {
  it('stops an infinite loop at its deadline and the runner keeps serving', async () => {
    const result = await run(await tool('loop', { timeoutMs: 300 }));
    expect(result).toMatchObject({ isError: true, error: { code: 'EXECUTION_TIMEOUT' } });
    const probe = await run(await tool('probe'));
    expect(probe.isError).toBe(false);
  });

  it('terminates the looping thread itself: a one-thread runner serves the next call', async () => {
    const single = new WasmRunner({ size: 1 });
    try {
      const loop = await tool('loop', { timeoutMs: 200, runner: single });
      const call = { id: 'c1', name: 'loop', arguments: {} };
      // Straight to the executor, without runExecutor's own timer: the deadline is the executor's.
      const ctx = { call, signal: new AbortController().signal, tier: 'embedded', attempt: 1, env: {}, trust: 'trusted', progress: () => {} } as const;
      await expect(loop.executor?.execute(call, ctx)).rejects.toMatchObject({ code: 'EXECUTION_TIMEOUT' });
      // Had the thread kept spinning, this call would wait for it forever.
      const probe = await tool('probe', { runner: single });
      expect((await probe.executor?.execute({ ...call, name: 'probe' }, ctx))?.structuredContent).toMatchObject({ env_count: 0 });
      expect(single.threads).toBe(1);
    } finally {
      await single.close();
    }
  });

  it('stops an infinite loop when the caller cancels', async () => {
    const controller = new AbortController();
    const pending = run(await tool('loop', { timeoutMs: 60_000 }), {}, controller.signal);
    setTimeout(() => controller.abort(new Error('user pressed stop')), 100);
    expect(await pending).toMatchObject({ isError: true, error: { code: 'CANCELLED' } });
  });

  it('stops a memory blow-up at the module maximum with RESOURCE_LIMIT memory', async () => {
    const result = await run(await tool('grow', { memoryLimitMb: 4 }));
    // grow.wat declares 64 pages = 4 MiB, exactly the cap.
    expect(result).toMatchObject({ isError: true, error: { code: 'RESOURCE_LIMIT', details: { limit: 'memory' } } });
  });

  it('refuses modules whose memory maximum is above the cap or missing', async () => {
    expect(await run(await tool('grow', { memoryLimitMb: 1 }))).toMatchObject({ isError: true, error: { code: 'EXECUTION_FAILED' } });
    const unbounded = await run(await tool('unbounded'));
    expect(unbounded).toMatchObject({ isError: true, error: { code: 'EXECUTION_FAILED' } });
    expect(unbounded.content).toMatch(/no maximum/);
  });

  it('gives no preopened directory, no file access and an empty environment', async () => {
    const result = await run(await tool('probe'));
    // 8 = EBADF: fd 3 is not a preopen, and path_open has no directory to resolve "/etc/passwd" against.
    expect(result.structuredContent).toEqual({ prestat: 8, open: 8, open_stdin: 8, env_count: 0, env_bytes: 0 });
  });

  it('caps output with RESOURCE_LIMIT output', async () => {
    const result = await run(await tool('flood', { outputBytes: 100_000 }));
    expect(result).toMatchObject({ isError: true, error: { code: 'RESOURCE_LIMIT', details: { limit: 'output' } } });
  });

  it('turns a non-zero exit into EXECUTION_FAILED with the last stderr line', async () => {
    const result = await run(await tool('fail'));
    expect(result).toMatchObject({ isError: true, error: { code: 'EXECUTION_FAILED' } });
    expect(result.content).toMatch(/exited with code 3: second: bad input$/);
  });

  it('replaces terminated threads and runs calls in parallel afterwards', async () => {
    const loop = await tool('loop', { timeoutMs: 200 });
    const results = await Promise.all([run(loop), run(loop), run(loop)]);
    expect(results.map((r) => r.error?.code)).toEqual(['EXECUTION_TIMEOUT', 'EXECUTION_TIMEOUT', 'EXECUTION_TIMEOUT']);
    const probe = await tool('probe');
    const ok = await Promise.all([run(probe), run(probe)]);
    expect(ok.every((r) => !r.isError)).toBe(true);
    expect(runner.threads).toBeLessThanOrEqual(2);
  });
});
