/**
 * Example Embedded-tier tools implemented as WebAssembly (WASI preview 1).
 * `npm ci` builds the module (examples/package.json `build`: wabt's wat2wasm,
 * examples/wasm/word_count.wat → examples/dist/wasm/word_count.wasm).
 *
 *   forge-worker --tier embedded --tools examples/wasm-tools.ts
 */
import { defineWasmTool } from '@forge-fleet/worker/wasm';

export const wordCount = defineWasmTool({
  name: 'word_count',
  description: 'Counts the words (runs of non-whitespace) of a text, inside a WebAssembly sandbox.',
  parameters: { type: 'object', properties: { text: { type: 'string', maxLength: 100_000 } }, required: ['text'], additionalProperties: false },
  outputSchema: { type: 'object', properties: { words: { type: 'integer', minimum: 0 } }, required: ['words'] },
  wasm: new URL('./dist/wasm/word_count.wasm', import.meta.url),
  memoryLimitMb: 1,
  timeoutMs: 2_000,
  speculatable: true,
});

export default [wordCount];
