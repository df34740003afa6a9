/** The fleet arm's agent: the TypeScript client over HTTP to a dispatcher. */
import { FleetClient } from '@forge-fleet/client';
import { runAgent } from './agent-loop.js';

const [url = '', inflight = '1'] = process.argv.slice(2);
const token = process.env.FORGE_TOKEN;
const client = new FleetClient({ url, connections: Math.max(1, Number(inflight)), ...(token === undefined ? {} : { token }) });
await runAgent(Number(inflight), () => client.call('noop', {}));
process.exit(0);
