import { existsSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { type AddressInfo, createServer as createNetServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { runExecutor, type Tool, type ToolCall, type ToolDefinition, type ToolResult } from '@forge-fleet/shared';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { loadToolsModule } from '../src/tools/load.js';

const MODULE = fileURLToPath(new URL('./fixtures/sandbox-tools.ts', import.meta.url));

/** Log lines go to memory: tests must not print, and some assert on what was logged. */
function memoryLogger(): { log: pino.Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString('utf8').split('\n').filter(Boolean)) lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { log: pino({ level: 'info' }, stream), lines };
}

let tools: Tool[];
let counter = 0;

function definition(name: string): ToolDefinition {
  const tool = tools.find((t) => t.definition.name === name);
  if (tool === undefined) throw new Error(`fixture has no tool ${name}`);
  return tool.definition;
}

function callOf(name: string, args: Record<string, unknown> = {}): ToolCall {
  counter += 1;
  return { id: `call-${counter}`, name, arguments: args };
}

function inProcess(name: string, args: Record<string, unknown> = {}, options: Parameters<typeof runExecutor>[3] = {}): Promise<ToolResult> {
  const executor = tools.find((t) => t.definition.name === name)?.executor;
  if (executor === undefined) throw new Error(`fixture has no executor for ${name}`);
  return runExecutor(executor, definition(name), { id: 'same-id', name, arguments: args }, options);
}

function sandboxed(sandbox: Sandbox, name: string, args: Record<string, unknown> = {}, options: Parameters<typeof runExecutor>[3] = {}, def = definition(name)): Promise<ToolResult> {
  return runExecutor(sandbox.executorFor(name), def, { ...callOf(name, args), id: 'same-id' }, options);
}

async function instanceOf(sandbox: Sandbox): Promise<unknown> {
  return (await sandboxed(sandbox, 'instance')).structuredContent?.instance;
}

beforeAll(async () => {
  tools = await loadToolsModule(MODULE);
});

describe('sandbox: calls waiting for a slot', () => {
  let sandbox: Sandbox;
  beforeAll(async () => {
    sandbox = await startSandbox({ modulePath: MODULE, tools, log: memoryLogger().log, conditions: ['forge-source'], size: 1, callsPerProcess: 1, cancelGraceMs: 200 });
  });
  afterAll(() => sandbox.close());

  it('a call cancelled while it waits ends CANCELLED at once, never runs, and leaves the slot to the next call', async () => {
    const holder = new AbortController();
    const holding = sandboxed(sandbox, 'wait_for_abort', {}, { signal: holder.signal });
    const waiter = new AbortController();
    const waiting = sandboxed(sandbox, 'runs', {}, { signal: waiter.signal });
    waiter.abort('caller gave up');
    // Answered while the slot is still held: it does not wait for its turn to be told.
    expect(await waiting).toMatchObject({ isError: true, error: { code: 'CANCELLED' }, content: expect.stringContaining('caller gave up') as string });
    holder.abort('done holding');
    expect(await holding).toMatchObject({ isError: true, error: { code: 'CANCELLED' } });
    // The cancelled call never ran: the process's first run of `runs` is this one.
    expect((await sandboxed(sandbox, 'runs')).structuredContent).toMatchObject({ runs: 1 });
  });
});

describe('sandbox: isolation', () => {
  let sandbox: Sandbox;
  let scratch: string;
  let server: Server;
  let hits = 0;
  const secret = 'FORGE_SANDBOX_TEST_SECRET';
  const isolationLog = memoryLogger();

  beforeAll(async () => {
    process.env[secret] = 'the worker must not leak this';
    scratch = mkdtempSync(join(tmpdir(), 'forge-sandbox-test-'));
    server = createServer((_req, res) => {
      hits += 1;
      res.end('reached the worker host');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    sandbox = await startSandbox({ modulePath: MODULE, tools, log: isolationLog.log, conditions: ['forge-source'], size: 2 });
  });

  afterAll(async () => {
    delete process.env[secret];
    await sandbox.close();
    await new Promise((resolve) => server.close(resolve));
    rmSync(scratch, { recursive: true, force: true });
  });

  it('reports the layers in force, as probed', () => {
    expect(sandbox.isolation).toMatchObject({ network: 'namespace', processes: 'namespace', filesystem: 'bubblewrap+permission-model', orphans: 'killed', environment: 'empty' });
    expect(['prlimit', 'ulimit']).toContain(sandbox.isolation.rlimits);
  });

  it('blocks the network: a server the worker reaches is unreachable from the sandbox', async () => {
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
    expect(await inProcess('fetch', { url })).toMatchObject({ isError: false, content: 'reached the worker host' });
    const before = hits;
    const result = await sandboxed(sandbox, 'fetch', { url });
    expect(result).toMatchObject({ isError: true, error: { code: 'EXECUTION_FAILED' } });
    expect(hits).toBe(before);
  });

  it('blocks Unix-domain sockets, which a network namespace alone does not', async () => {
    const path = join(scratch, 'service.sock');
    let connections = 0;
    const unix = createNetServer((socket) => {
      connections += 1;
      socket.end();
    });
    await new Promise<void>((resolve) => unix.listen(path, resolve));
    try {
      expect(await inProcess('unix_connect', { path })).toMatchObject({ isError: false, content: 'connected' });
      expect(await sandboxed(sandbox, 'unix_connect', { path })).toMatchObject({ isError: true, content: expect.stringContaining('Unix-domain sockets are not available') as string });
      expect(connections).toBe(1);
    } finally {
      await new Promise((resolve) => unix.close(resolve));
    }
  });

  it('blocks writing files', async () => {
    const path = join(scratch, 'written.txt');
    expect(await sandboxed(sandbox, 'write_file', { path })).toMatchObject({ isError: true, error: { code: 'EXECUTION_FAILED' }, content: expect.stringMatching(/restricted|denied/i) as string });
    expect(existsSync(path)).toBe(false);
  });

  it('blocks reading files outside the bundle', async () => {
    const path = join(scratch, 'secret.txt');
    writeFileSync(path, 'top secret');
    expect(await inProcess('read_file', { path })).toMatchObject({ isError: false, content: 'top secret' });
    const result = await sandboxed(sandbox, 'read_file', { path });
    expect(result).toMatchObject({ isError: true, error: { code: 'EXECUTION_FAILED' } });
    expect(result.content).not.toContain('top secret');
  });

  it('blocks a symlink escape: a link beside the bundle pointing at a secret elsewhere', async () => {
    const secret = join(scratch, 'linked-secret.txt');
    writeFileSync(secret, 'linked secret');
    const bundle = String(isolationLog.lines.find((l) => l.msg === 'sandbox ready')?.bundle);
    const link = join(dirname(bundle), 'escape.txt');
    symlinkSync(secret, link);
    expect(await inProcess('read_file', { path: link })).toMatchObject({ isError: false, content: 'linked secret' });
    const result = await sandboxed(sandbox, 'read_file', { path: link });
    expect(result).toMatchObject({ isError: true, error: { code: 'EXECUTION_FAILED' } });
    expect(result.content).not.toContain('linked secret');
  });

  it('blocks child processes', async () => {
    expect(await inProcess('spawn')).toMatchObject({ isError: false, content: 'escaped\n' });
    expect(await sandboxed(sandbox, 'spawn')).toMatchObject({ isError: true, content: expect.stringMatching(/restricted|denied/i) as string });
  });

  it('starts handlers with an empty environment; only the skill env reaches ctx.env', async () => {
    expect((await inProcess('env')).structuredContent).toHaveProperty(secret);
    expect((await sandboxed(sandbox, 'env')).structuredContent).toEqual({});
    const result = await sandboxed(sandbox, 'context', {}, { env: { SKILL_TOKEN: 't' }, attempt: 2, trust: 'quarantined' });
    expect(result.structuredContent).toEqual({ id: 'same-id', tier: 'platform', attempt: 2, env: { SKILL_TOKEN: 't' }, trust: 'quarantined' });
  });

  it('hides the worker: a handler cannot signal processes outside its PID namespace', async () => {
    // Refused by the JavaScript guard before the kernel (where the PID namespace answers ESRCH) is asked.
    expect(await sandboxed(sandbox, 'signal_parent', { pid: process.pid })).toMatchObject({ isError: true, content: expect.stringMatching(/ESRCH|signalling other processes is not available/) as string });
  });

  it("carries a handler's progress reports out of the sandbox, before its result", async () => {
    const heard: unknown[] = [];
    const result = await sandboxed(sandbox, 'progress_once', {}, { onProgress: (p) => heard.push(p) });
    expect(result).toMatchObject({ isError: false, content: 'done' });
    expect(heard).toEqual([{ progress: 1, total: 2, message: 'half', at: expect.any(Number) as number }]);
  });

  it('runs WebAssembly (Embedded-tier) handlers', async () => {
    expect(await sandboxed(sandbox, 'wasm_add', { a: 2, b: 40 })).toMatchObject({ isError: false, structuredContent: { sum: 42 } });
  });

  it.each([
    ['echo', { text: 'hello' }],
    ['shout', { text: 'hello' }],
    ['count', { n: 3 }],
    ['nothing', {}],
    ['context', {}],
    ['wasm_add', { a: -5, b: 3 }],
    ['fails', {}],
    ['fails_typed', {}],
    ['progress_bad', {}],
  ] as const)('returns what the in-process run returns for %s', async (name, args) => {
    const options = { env: { A: 'b' }, attempt: 3 };
    expect(await sandboxed(sandbox, name, args, options)).toEqual(await inProcess(name, args, options));
  });

  it('runs more calls than processes, side by side and beyond callsPerProcess by queueing', async () => {
    const results = await Promise.all(Array.from({ length: 80 }, (_, i) => sandboxed(sandbox, 'count', { n: i })));
    expect(results.map((r) => r.content)).toEqual(Array.from({ length: 80 }, (_, i) => `[1,2,${i}]`));
  });

  it('refuses tools it does not serve', () => {
    expect(() => sandbox.executorFor('no_such_tool')).toThrow(expect.objectContaining({ code: 'TOOL_NOT_FOUND' }) as Error);
  });
});

describe('sandbox: limits and recovery', () => {
  let sandbox: Sandbox;
  const logged = memoryLogger();

  beforeAll(async () => {
    sandbox = await startSandbox({
      modulePath: MODULE,
      tools,
      log: logged.log,
      conditions: ['forge-source'],
      size: 1,
      limits: { cpuSeconds: 1, memoryMb: 64, outputBytes: 100_000 },
      cancelGraceMs: 200,
    });
  });

  afterAll(() => sandbox.close());

  it('stops an endless loop at the CPU limit with RESOURCE_LIMIT, then serves the next call from a new process', async () => {
    const before = await instanceOf(sandbox);
    expect(await sandboxed(sandbox, 'spin')).toMatchObject({ isError: true, error: { code: 'RESOURCE_LIMIT', details: { limit: 'cpu' } } });
    const after = await instanceOf(sandbox);
    expect(after).toEqual(expect.any(String));
    expect(after).not.toBe(before);
  });

  it('runs calls side by side in one process; a call over its CPU budget fails alone with RESOURCE_LIMIT, its neighbour as a bystander', async () => {
    // size 1: all three share the one process. Nobody can tell whose the CPU was, so each runs again alone:
    // the spinner meets the limit by itself, the others finish as they would have.
    const cancel = new AbortController();
    const waiting = sandboxed(sandbox, 'wait_for_abort', {}, { signal: cancel.signal });
    const spinning = sandboxed(sandbox, 'spin');
    const shouting = new Promise((resolve) => setTimeout(resolve, 50)).then(() => sandboxed(sandbox, 'shout', { text: 'alongside' }));
    expect(await spinning).toMatchObject({ isError: true, error: { code: 'RESOURCE_LIMIT', details: { limit: 'cpu' } } });
    expect((await shouting).content).toBe('ALONGSIDE');
    cancel.abort('test over');
    expect(await waiting).toMatchObject({ isError: true, error: { code: 'CANCELLED' } });
    expect(logged.lines.some((l) => String(l.msg).includes('running the call again alone'))).toBe(true);
    expect((await sandboxed(sandbox, 'shout', { text: 'next' })).content).toBe('NEXT');
  });

  it('stops an endless loop at the tool timeout and replaces the process', async () => {
    const before = await instanceOf(sandbox);
    expect(await sandboxed(sandbox, 'spin', {}, {}, { ...definition('spin'), timeoutMs: 100 })).toMatchObject({ isError: true, error: { code: 'EXECUTION_TIMEOUT' } });
    // The spinning process is killed after the grace period; the next call waits for its replacement.
    expect(await instanceOf(sandbox)).not.toBe(before);
  });

  it('stops a heap bomb with RESOURCE_LIMIT memory', async () => {
    expect(await sandboxed(sandbox, 'heap_bomb')).toMatchObject({ isError: true, error: { code: 'RESOURCE_LIMIT', details: { limit: 'memory' } } });
    expect(await sandboxed(sandbox, 'echo', { text: 'still here' })).toMatchObject({ isError: false, structuredContent: { echoed: 'still here' } });
  });

  it('stops an off-heap (Buffer) bomb with RESOURCE_LIMIT memory', async () => {
    expect(await sandboxed(sandbox, 'buffer_bomb')).toMatchObject({ isError: true, error: { code: 'RESOURCE_LIMIT', details: { limit: 'memory' } } });
  });

  it('refuses a result larger than the output limit', async () => {
    expect(await sandboxed(sandbox, 'big_output')).toMatchObject({ isError: true, error: { code: 'RESOURCE_LIMIT', details: { limit: 'output' } } });
  });

  it('survives a handler that kills its process; the next call runs', async () => {
    const result = await sandboxed(sandbox, 'crash');
    expect(result).toMatchObject({ isError: true, error: { code: 'EXECUTION_FAILED' }, content: expect.stringContaining('exit code 3') as string });
    expect(await sandboxed(sandbox, 'echo', { text: 'next' })).toMatchObject({ isError: false, structuredContent: { echoed: 'next' } });
  });

  it('delivers cancellation to the handler inside the sandbox, and keeps a process whose handler honours it', async () => {
    const before = await instanceOf(sandbox);
    const controller = new AbortController();
    const call = callOf('wait_for_abort');
    const execution = sandbox.executorFor('wait_for_abort').execute(call, { call, signal: controller.signal, tier: 'platform', attempt: 1, env: {}, trust: 'trusted', progress: () => {} });
    controller.abort(new Error('the caller gave up'));
    await expect(execution).rejects.toMatchObject({ code: 'EXECUTION_FAILED', message: expect.stringContaining('aborted inside the sandbox: the caller gave up') as string });
    expect(await instanceOf(sandbox)).toBe(before);
  });

  it('answers CANCELLED at once through runExecutor', async () => {
    const controller = new AbortController();
    const pending = sandboxed(sandbox, 'wait_for_abort', {}, { signal: controller.signal });
    controller.abort('stop');
    expect(await pending).toMatchObject({ isError: true, error: { code: 'CANCELLED' } });
  });

  it('kills and replaces a process whose handler ignores cancellation', async () => {
    const before = await instanceOf(sandbox);
    const controller = new AbortController();
    const call = callOf('hang');
    const execution = sandbox.executorFor('hang').execute(call, { call, signal: controller.signal, tier: 'platform', attempt: 1, env: {}, trust: 'trusted', progress: () => {} });
    controller.abort(new Error('enough'));
    await expect(execution).rejects.toMatchObject({ code: 'CANCELLED' });
    expect(await instanceOf(sandbox)).not.toBe(before);
  });

  it('logged no unexpected deaths of idle processes', () => {
    expect(logged.lines.filter((l) => l.msg === 'an idle sandbox process died')).toEqual([]);
  });
});

describe('sandbox: start-up', () => {
  it('refuses tools the module does not have', async () => {
    const stranger = { ...tools[0]!, definition: { ...tools[0]!.definition, name: 'not_in_module' } };
    await expect(startSandbox({ modulePath: MODULE, tools: [stranger], log: memoryLogger().log, conditions: ['forge-source'], size: 1 })).rejects.toMatchObject({
      code: 'CONFIG_INVALID',
      message: expect.stringContaining('not_in_module') as string,
    });
  });

  it('refuses a module that cannot be bundled', async () => {
    await expect(startSandbox({ modulePath: '/nonexistent/tools.ts', tools, log: memoryLogger().log, size: 1 })).rejects.toMatchObject({ code: 'CONFIG_INVALID' });
  });

  it('refuses nonsensical limits', async () => {
    await expect(startSandbox({ modulePath: MODULE, tools, log: memoryLogger().log, limits: { cpuSeconds: 0 } })).rejects.toMatchObject({
      code: 'CONFIG_INVALID',
      message: expect.stringContaining('cpuSeconds') as string,
    });
  });
});
