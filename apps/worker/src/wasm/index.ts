export { defineWasmTool, WasmToolExecutor, sharedWasmRunner, DEFAULT_WASM_MEMORY_MB, DEFAULT_WASM_OUTPUT_BYTES, DEFAULT_WASM_TIMEOUT_MS, type WasmToolSpec } from './wasm-tool.js';
export { WasmRunner, type WasmEnforcement, type WasmRunnerOptions } from './runner.js';
