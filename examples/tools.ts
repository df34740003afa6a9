/**
 * The example tool pack `npm start` serves: one module, tools of every tier.
 * Each worker serves the tools of its own tier (and pool):
 *
 *   forge-worker --tier platform --tools examples/tools.ts
 *   forge-worker --tier embedded --tools examples/tools.ts
 *   forge-worker --tier host     --tools examples/tools.ts
 *
 * Platform and Embedded JavaScript handlers run in the worker's sandbox
 * processes; `word_count` is WebAssembly and runs under WASI in worker threads.
 */
import { defineTool } from '@forge-fleet/shared';
import { wordCount } from './wasm-tools.js';

// (module (func (export "add") (param i32 i32) (result i32) local.get 0 local.get 1 i32.add))
const ADD_WASM = new Uint8Array([
  0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, 0x01, 0x07, 0x01, 0x60, 0x02, 0x7f, 0x7f, 0x01, 0x7f, 0x03, 0x02, 0x01, 0x00, 0x07, 0x07, 0x01, 0x03, 0x61, 0x64,
  0x64, 0x00, 0x00, 0x0a, 0x09, 0x01, 0x07, 0x00, 0x20, 0x00, 0x20, 0x01, 0x6a, 0x0b,
]);
// The WebAssembly global exists in every Node.js; this project's type libraries just do not describe it.
interface WasmApi {
  compile(bytes: Uint8Array): Promise<object>;
  instantiate(module: object, imports: object): Promise<{ exports: Record<string, unknown> }>;
}
const wasm = (globalThis as unknown as { WebAssembly: WasmApi }).WebAssembly;
let addModule: Promise<object> | undefined;

export default [
  // A real WebAssembly (WASI) tool, built from examples/wasm/word_count.wat; it runs in the worker's WASM threads.
  wordCount,
  defineTool({
    name: 'clock',
    description: 'The current UTC time, ISO-8601.',
    tier: 'platform',
    speculatable: true,
    handler: () => new Date().toISOString(),
  }),
  defineTool({
    name: 'echo',
    description: 'Returns the text it was given.',
    tier: 'embedded',
    parameters: { type: 'object', properties: { text: { type: 'string', maxLength: 10_000 } }, required: ['text'], additionalProperties: false },
    handler: (args) => ({ echoed: args.text }),
  }),
  defineTool({
    name: 'wasm_add',
    description: 'Adds two 32-bit integers inside a WebAssembly module.',
    tier: 'embedded',
    parameters: {
      type: 'object',
      properties: { a: { type: 'integer', minimum: -2147483648, maximum: 2147483647 }, b: { type: 'integer', minimum: -2147483648, maximum: 2147483647 } },
      required: ['a', 'b'],
    },
    handler: async (args) => {
      addModule ??= wasm.compile(ADD_WASM);
      const instance = await wasm.instantiate(await addModule, {});
      const add = instance.exports.add as (a: number, b: number) => number;
      return { sum: add(Number(args.a), Number(args.b)) };
    },
  }),
  defineTool({
    name: 'http_get',
    description: 'Fetches a URL over HTTP(S) and returns its status and the first 2,000 characters of the body.',
    tier: 'host',
    timeoutMs: 10_000,
    retryable: true,
    parameters: { type: 'object', properties: { url: { type: 'string', format: 'uri', pattern: '^https?://' } }, required: ['url'] },
    handler: async (args, ctx) => {
      const response = await fetch(String(args.url), { signal: ctx.signal });
      const body = await response.text();
      return { status: response.status, body: body.slice(0, 2000) };
    },
  }),
];
