/**
 * @module @forge-fleet/client
 *
 * Call tools on a Forge Fleet from any TypeScript agent, over HTTP with
 * keep-alive. Speaks only the dispatcher's HTTP API: it imports neither app
 * nor BullMQ.
 */
export { FleetClient, type FleetClientOptions, type CallOptions } from './client.js';
export type { ToolResult, ContentBlock, CallView } from '@forge-fleet/shared';
