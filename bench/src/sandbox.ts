/**
 * What the tool sandbox costs: spawning a sandbox process layer by layer, a
 * replacement after a crash, and a warm call against the same call in-process.
 * Optionally isolated-vm 5.0.4 for comparison (set ISOLATED_VM to the package's
 * directory; it is not a dependency of this repository).
 *
 *   npx tsx --conditions=forge-source bench/src/sandbox.ts
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runExecutor, type Tool, type ToolResult } from '@forge-fleet/shared';
import { pino } from 'pino';
// The worker's index does not export the sandbox yet; switch to '@forge-fleet/worker' once it does.
import { loadToolsModule, startSandbox } from '@forge-fleet/worker';

const TOOLS_MODULE = fileURLToPath(new URL('../../examples/tools.ts', import.meta.url));
const SPAWNS = 20;
const CALLS = 2000;

function quantile(sorted: readonly number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN;
}

function summary(label: string, samplesMs: number[]): void {
  const sorted = [...samplesMs].sort((a, b) => a - b);
  const mean = sorted.reduce((a, b) => a + b, 0) / sorted.length;
  process.stdout.write(`${label.padEnd(58)} n=${String(sorted.length).padStart(4)}  mean ${mean.toFixed(3)} ms  p50 ${quantile(sorted, 0.5).toFixed(3)} ms  p99 ${quantile(sorted, 0.99).toFixed(3)} ms\n`);
}

/** Milliseconds from spawn until the process has said it is running (a line on fd 3). */
function timeToReady(file: string, args: readonly string[]): Promise<number> {
  const start = performance.now();
  const child = spawn(file, args, { env: {}, stdio: ['ignore', 'ignore', 'ignore', 'pipe'] });
  return new Promise((resolve, reject) => {
    child.stdio[3]?.once('data', () => resolve(performance.now() - start));
    child.once('exit', (code) => reject(new Error(`${file} exited with ${code} before it was ready`)));
  });
}

async function layers(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'forge-sandbox-bench-'));
  const script = join(dir, 'ready.mjs');
  writeFileSync(script, "import { Socket } from 'node:net'; new Socket({ fd: 3 }).end('ready\\n');\n");
  const node = [process.execPath, '--experimental-permission', `--allow-fs-read=${script}`, '--disable-warning=ExperimentalWarning', script];
  const unshare = ['unshare', '--user', '--map-root-user', '--net', '--pid', '--fork', '--kill-child', '--'];
  const prlimit = ['prlimit', '--cpu=21', `--data=${512 * 1024 * 1024}`, '--nofile=64', '--core=0', '--'];
  const variants: [string, string[]][] = [
    ['node (no sandbox)', [process.execPath, script]],
    ['node + permission model', node],
    ['unshare user+net+pid + node + permission', [...unshare, ...node]],
    ['prlimit + unshare + node + permission (full stack)', [...prlimit, ...unshare, ...node]],
  ];
  try {
    for (const [label, [file, ...args]] of variants) {
      const samples: number[] = [];
      for (let i = 0; i < SPAWNS; i++) samples.push(await timeToReady(file ?? '', args));
      summary(`spawn to ready: ${label}`, samples);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function calls(tools: Tool[]): Promise<void> {
  const log = pino({ level: 'warn' });
  const started = performance.now();
  const sandbox = await startSandbox({ modulePath: TOOLS_MODULE, tools, log, size: 1, conditions: ['forge-source'] });
  summary('startSandbox (probe + esbuild bundle + 1 process)', [performance.now() - started]);
  process.stdout.write(`isolation: ${JSON.stringify(sandbox.isolation)}\n`);
  try {
    for (const [name, args] of [
      ['echo', { text: 'hello' }],
      ['wasm_add', { a: 2, b: 3 }],
    ] as const) {
      const tool = tools.find((t) => t.definition.name === name);
      if (tool?.executor === undefined) throw new Error(`${TOOLS_MODULE} has no ${name}`);
      const run = async (executor: typeof tool.executor, label: string): Promise<ToolResult> => {
        const samples: number[] = [];
        let last: ToolResult | undefined;
        for (let i = 0; i < CALLS; i++) {
          const t = performance.now();
          last = await runExecutor(executor, tool.definition, { id: `c${i}`, name, arguments: args }, {});
          samples.push(performance.now() - t);
        }
        summary(`${name}: ${label}`, samples.slice(CALLS / 10));
        if (last === undefined || last.isError) throw new Error(`${name} failed: ${last?.content}`);
        return last;
      };
      await run(tool.executor, 'in-process');
      await run(sandbox.executorFor(name), 'warm sandbox process');
    }
  } finally {
    await sandbox.close();
  }
}

async function recovery(): Promise<void> {
  // A handler that kills its own process: the time until the pool serves again is a replacement spawn of the real bundle.
  const dir = mkdtempSync(join(tmpdir(), 'forge-sandbox-bench-'));
  const module = join(dir, 'crash-tools.mjs');
  // Plain objects: a module in a temp dir cannot resolve the workspace packages.
  writeFileSync(
    module,
    [
      'const tool = (name, fn) => ({ definition: { name, tier: "platform" }, executor: { name, execute: async (call) => ({ toolCallId: call.id, name, content: fn(), isError: false }) } });',
      'export default [tool("crash", () => process.exit(1)), tool("ok", () => "ok")];',
      '',
    ].join('\n'),
  );
  const tools = await loadToolsModule(module);
  const [crash, ok] = tools;
  if (crash === undefined || ok === undefined) throw new Error('the crash module lost its tools');
  const sandbox = await startSandbox({ modulePath: module, tools, log: pino({ level: 'silent' }), size: 1, conditions: ['forge-source'] });
  try {
    const samples: number[] = [];
    for (let i = 0; i < SPAWNS; i++) {
      await runExecutor(sandbox.executorFor('crash'), crash.definition, { id: `x${i}`, name: 'crash', arguments: {} }, {});
      const t = performance.now();
      await runExecutor(sandbox.executorFor('ok'), ok.definition, { id: `y${i}`, name: 'ok', arguments: {} }, {});
      samples.push(performance.now() - t);
    }
    summary('next call after a crash (replacement spawn of the bundle)', samples);
  } finally {
    await sandbox.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

interface IsolatedVm {
  Isolate: new (options: { memoryLimit: number }) => {
    createContextSync(): { global: { setSync(key: string, value: unknown): void }; evalSync(code: string, options?: { timeout?: number }): unknown; release(): void };
    compileScriptSync(code: string): { runSync(context: unknown, options?: { timeout?: number }): unknown };
    dispose(): void;
  };
}

function isolatedVm(): void {
  const dir = process.env.ISOLATED_VM;
  if (dir === undefined) {
    process.stdout.write('isolated-vm: skipped (set ISOLATED_VM to the directory of an isolated-vm 5.0.4 install)\n');
    return;
  }
  const ivm = createRequire(import.meta.url)(dir) as IsolatedVm;
  const create: number[] = [];
  for (let i = 0; i < SPAWNS; i++) {
    const t = performance.now();
    const isolate = new ivm.Isolate({ memoryLimit: 64 });
    const context = isolate.createContextSync();
    context.evalSync('1');
    create.push(performance.now() - t);
    isolate.dispose();
  }
  summary('isolated-vm: new Isolate + context (memoryLimit 64 MiB)', create);
  const isolate = new ivm.Isolate({ memoryLimit: 64 });
  const context = isolate.createContextSync();
  context.evalSync("globalThis.echo = (json) => JSON.stringify({ echoed: JSON.parse(json).text });");
  const samples: number[] = [];
  for (let i = 0; i < CALLS; i++) {
    const t = performance.now();
    context.evalSync(`echo(${JSON.stringify(JSON.stringify({ text: 'hello' }))})`, { timeout: 1000 });
    samples.push(performance.now() - t);
  }
  summary('isolated-vm: echo via evalSync in a warm isolate', samples.slice(CALLS / 10));
  isolate.dispose();
}

const tools = await loadToolsModule(TOOLS_MODULE);
process.stdout.write(`node ${process.version}, ${SPAWNS} spawns per variant, ${CALLS} calls per tool (first 10% dropped)\n`);
await layers();
await calls(tools);
await recovery();
isolatedVm();
