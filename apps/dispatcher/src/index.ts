/**
 * @module @forge-fleet/dispatcher
 *
 * The dispatcher: HTTP API → scope → lookup in the live catalog → schema
 * validation → approval → tier queue, and results back to the caller. The
 * `forge-dispatcher` command (main.ts) is the usual way in.
 */
export { createDispatcher, type Dispatcher, type DispatcherOptions } from './dispatcher.js';
export { buildApp, type AppDeps } from './app.js';
export { DispatcherEnv, parseDispatcherEnv } from './env.js';
