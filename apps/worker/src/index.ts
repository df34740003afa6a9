/**
 * @module @forge-fleet/worker
 *
 * Worker pools: take calls from a tier queue, run them, answer the waiting
 * dispatcher. The `forge-worker` command (main.ts) is the usual way in.
 */
export { WorkerPool, type WorkerPoolOptions } from './pools/worker-pool.js';
export { loadToolsModule, selectTools } from './tools/load.js';
export { WorkerEnv, parseWorkerEnv } from './env.js';
export { WorkerArgs, parseWorkerArgs, USAGE } from './cli.js';
export { loadServersFile, placeOfTool, runsOn, type McpServerConfig, type LoadedServersFile } from './mcp-servers/servers-file.js';
export { REAPER_NAME } from './mcp-servers/group-reaper.js';
export { startSandbox, closeInheritedDescriptors, DEFAULT_LIMITS, type Sandbox, type SandboxIsolation, type SandboxOptions, type SandboxLimits } from './sandbox/index.js';
export { defineWasmTool, WasmToolExecutor, WasmRunner, sharedWasmRunner, type WasmToolSpec, type WasmEnforcement, type WasmRunnerOptions } from './wasm/index.js';
