/**
 * A compiled `WebAssembly.Module`, opaque to this package's code (only passed
 * to `WebAssembly` itself and posted to worker threads). Declared here because
 * the type libraries of packages that import this one need not describe
 * `WebAssembly` at all.
 */
export type WasmModule = object;

/**
 * The parts of the `WebAssembly` global this package uses. Node has it, but the
 * type libraries of this project (ES2022 + @types/node, no DOM) declare only
 * its types, not the value.
 */
export interface WasmApi {
  compile(bytes: Uint8Array): Promise<WasmModule>;
  Module: {
    exports(module: WasmModule): { name: string; kind: string }[];
    imports(module: WasmModule): { module: string; name: string; kind: string }[];
  };
}

export const wasmApi = (globalThis as unknown as { WebAssembly: WasmApi }).WebAssembly;
