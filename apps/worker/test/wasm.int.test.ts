/**
 * WebAssembly tools in a process of their own, as a worker runs them: the
 * example tools module is loaded through loadToolsModule, and the process
 * must print nothing (no ExperimentalWarning from node:wasi) while it stops
 * an infinite loop and a memory blow-up and keeps serving.
 */
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import wabtInit from 'wabt';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildFixture } from './fixtures/wasm/build.js';

const root = fileURLToPath(new URL('../../../', import.meta.url));
let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'forge-wasm-int-'));
  for (const name of ['loop', 'grow', 'probe']) await writeFile(join(dir, `${name}.wasm`), await buildFixture(name));
  // The example module as `npm ci` builds it (examples/package.json `build`), in case this checkout has not been built.
  const wabt = await wabtInit();
  const { readFile } = await import('node:fs/promises');
  const parsed = wabt.parseWat('word_count.wat', await readFile(join(root, 'examples/wasm/word_count.wat'), 'utf8'));
  await mkdir(join(root, 'examples/dist/wasm'), { recursive: true });
  await writeFile(join(root, 'examples/dist/wasm/word_count.wasm'), parsed.toBinary({}).buffer);
  parsed.destroy();
});
afterAll(() => rm(dir, { recursive: true, force: true }));

const script = (fixtures: string): string => `
import { runExecutor } from '@forge-fleet/shared';
import { defineWasmTool, loadToolsModule, sharedWasmRunner } from '@forge-fleet/worker';
const [wordCount] = await loadToolsModule(${JSON.stringify(join(root, 'examples/wasm-tools.ts'))});
const tools = [
  wordCount,
  defineWasmTool({ name: 'loop', wasm: ${JSON.stringify(join(fixtures, 'loop.wasm'))}, timeoutMs: 300 }),
  defineWasmTool({ name: 'grow', wasm: ${JSON.stringify(join(fixtures, 'grow.wasm'))}, memoryLimitMb: 4 }),
  defineWasmTool({ name: 'probe', wasm: ${JSON.stringify(join(fixtures, 'probe.wasm'))} }),
];
const call = (name, args) => {
  const t = tools.find((x) => x.definition.name === name);
  return runExecutor(t.executor, t.definition, { id: name, name, arguments: args });
};
const out = [];
out.push(await call('word_count', { text: 'the quick  brown\\nfox' }));
out.push(await call('loop', {}));
out.push(await call('grow', {}));
out.push(await call('probe', {}));
out.push(await call('word_count', { text: '' }));
process.stdout.write(JSON.stringify(out.map((r) => ({ isError: r.isError, code: r.error?.code, limit: r.error?.details?.limit, structured: r.structuredContent }))));
await sharedWasmRunner().close();
`;

function runChild(code: string): Promise<{ stdout: string; stderr: string; exit: number | null }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--conditions=forge-source', '--import', 'tsx', '--input-type=module', '-e', code], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => (stdout += c));
    child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
    child.on('error', reject);
    child.on('close', (exit) => resolve({ stdout, stderr, exit }));
  });
}

describe('WebAssembly tools in a worker-like process', () => {
  it('runs the example, stops a loop and a memory blow-up, stays healthy and prints no warning', async () => {
    const { stdout, stderr, exit } = await runChild(script(dir));
    expect(stderr).toBe('');
    expect(exit).toBe(0);
    expect(JSON.parse(stdout)).toEqual([
      { isError: false, structured: { words: 4 } },
      { isError: true, code: 'EXECUTION_TIMEOUT' },
      { isError: true, code: 'RESOURCE_LIMIT', limit: 'memory' },
      { isError: false, structured: { prestat: 8, open: 8, open_stdin: 8, env_count: 0, env_bytes: 0 } },
      { isError: false, structured: { words: 0 } },
    ]);
  });
});
