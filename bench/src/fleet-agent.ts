/**
 * The fleet arm's agent: the TypeScript client over HTTP to a dispatcher.
 * FORGE_TOKENS (comma-separated) spreads the calls over several callers, one
 * client per token, in turn; otherwise every call is FORGE_TOKEN's.
 */
import { FleetClient } from '@forge-fleet/client';
import { runAgent } from './agent-loop.js';

const [url = '', inflight = '1'] = process.argv.slice(2);
const n = Math.max(1, Number(inflight));
const tokens = (process.env.FORGE_TOKENS ?? process.env.FORGE_TOKEN ?? '').split(',').filter(Boolean);
const clients = tokens.length === 0 ? [new FleetClient({ url, connections: n })] : tokens.map((token) => new FleetClient({ url, connections: Math.max(1, Math.ceil(n / tokens.length)), token }));
let next = 0;
await runAgent(n, () => clients[next++ % clients.length]!.call('noop', {}));
process.exit(0);
