/**
 * `npx tsx --conditions=forge-source bench/src/wasm.ts`: what one WebAssembly
 * tool call costs on top of the work itself. The same `word_count` module
 * (examples/wasm, built by `npm run build -w @forge-fleet/examples`) runs
 *
 *   1. in a warm worker thread, fresh instance per call (how the fleet runs it),
 *   2. on the calling thread, fresh instance per call (no deadline possible),
 *   3. as a plain JavaScript handler doing the same count (the in-process baseline),
 *
 * sequentially (one call at a time: latency, not throughput). Figures measured
 * on the development machine are in docs/wasm.md.
 */
import { readFile } from 'node:fs/promises';
import { defineTool, runExecutor, type Tool } from '@forge-fleet/shared';
import { defineWasmTool, WasmRunner } from '@forge-fleet/worker';

const N = Number(process.env.N ?? 2_000);
const wasm = new Uint8Array(await readFile(new URL('../../examples/dist/wasm/word_count.wasm', import.meta.url)));
const parameters = { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] } as const;
const args = { text: 'the quick brown fox jumps over the lazy dog '.repeat(20) };

const threaded = new WasmRunner({ size: 1 });
const inline = new WasmRunner({ threads: false });
const tools: [string, Tool][] = [
  ['WASM, warm thread, fresh instance', defineWasmTool({ name: 'word_count', parameters, wasm, memoryLimitMb: 1, runner: threaded })],
  ['WASM, calling thread, fresh instance (no deadline)', defineWasmTool({ name: 'word_count', parameters, wasm, memoryLimitMb: 1, runner: inline })],
  ['JavaScript handler, in process', defineTool({ name: 'word_count', tier: 'embedded', parameters, handler: (a) => ({ words: String(a.text).split(/\s+/).filter(Boolean).length }) })],
];

async function time(label: string, tool: Tool): Promise<void> {
  const executor = tool.executor;
  if (executor === undefined) throw new Error('no executor');
  const once = async (i: number): Promise<void> => {
    const result = await runExecutor(executor, tool.definition, { id: `b${i}`, name: 'word_count', arguments: args });
    if (result.structuredContent?.words !== 180) throw new Error(`unexpected result: ${result.content}`);
  };
  for (let i = 0; i < 200; i++) await once(i);
  const began = process.hrtime.bigint();
  for (let i = 0; i < N; i++) await once(i);
  const us = Number(process.hrtime.bigint() - began) / 1000 / N;
  process.stdout.write(`${label.padEnd(54)} ${us.toFixed(1).padStart(8)} µs/call\n`);
}

const coldBegan = process.hrtime.bigint();
const cold = new WasmRunner({ size: 1 });
const first = defineWasmTool({ name: 'word_count', parameters, wasm, memoryLimitMb: 1, runner: cold });
if (first.executor === undefined) throw new Error('no executor');
await runExecutor(first.executor, first.definition, { id: 'cold', name: 'word_count', arguments: args });
process.stdout.write(`${'first call: compile + start a thread'.padEnd(54)} ${(Number(process.hrtime.bigint() - coldBegan) / 1e6).toFixed(1).padStart(8)} ms\n`);
await cold.close();
for (const [label, tool] of tools) await time(label, tool);
await threaded.close();
