/**
 * The two gateways people put in front of a stdio server to reach it over
 * HTTP, each started the way its README says, in front of server-everything:
 *
 * - mcp-proxy 6.7.19: `mcp-proxy --port P --server stream -- node <entry> stdio`;
 *   one upstream server process shared by every session, Streamable HTTP at `/mcp`.
 * - supergateway 4.0.0: `--stdio "<cmd>" --outputTransport streamableHttp --stateful`;
 *   a server process per session, Streamable HTTP at `/mcp`. Without
 *   `--stateful` it starts a server per request (the issue measured ~2.5 calls/s),
 *   so only the stateful mode is worth a point. `--logLevel none`: at its default
 *   (`info`) it logs every message both ways, which would measure its logging.
 */
import { join } from 'node:path';
import { createConnection } from 'node:net';
import { freePort } from '@forge-fleet/local-redis';
import { ROOT, type Spawned, spawnNode, until } from '../proc.js';
import { EVERYTHING_COMMAND } from './everything.js';

export type Gateway = 'mcp-proxy' | 'supergateway';

/** A running gateway and the endpoint agents connect to. */
export interface RunningGateway {
  readonly proc: Spawned;
  readonly url: string;
}

/** Whether something accepts TCP connections on the port. */
function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** Starts a gateway in front of server-everything; resolves once it listens. */
export async function startGateway(gateway: Gateway): Promise<RunningGateway> {
  const port = await freePort();
  const server = [EVERYTHING_COMMAND.command, ...EVERYTHING_COMMAND.args];
  const proc =
    gateway === 'mcp-proxy'
      ? spawnNode([join(ROOT, 'node_modules/mcp-proxy/dist/bin/mcp-proxy.mjs'), '--port', String(port), '--server', 'stream', '--', ...server])
      : spawnNode([
          join(ROOT, 'node_modules/supergateway/dist/index.js'),
          '--stdio',
          server.join(' '),
          '--outputTransport',
          'streamableHttp',
          '--stateful',
          '--port',
          String(port),
          '--logLevel',
          'none',
        ]);
  await until(`${gateway} listening on ${port}`, async () => {
    if (proc.child.exitCode !== null) throw new Error(`${gateway} exited: ${proc.out.slice(-500)}`);
    return listening(port);
  });
  return { proc, url: `http://127.0.0.1:${port}/mcp` };
}
