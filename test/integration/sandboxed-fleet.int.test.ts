import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import { FleetClient } from '@forge-fleet/client';
import { freePort } from '@forge-fleet/local-redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, TestFleet } from '../fixtures/fleet.js';
import { sample } from '../fixtures/prometheus.js';
import { until } from '../fixtures/wait.js';

/**
 * The sandbox as the fleet runs it: a platform worker with FORGE_SANDBOX on
 * (the default), calls submitted through the dispatcher. The handler that
 * tries the network gets an error result; the worker — which can reach the
 * same server — goes on serving.
 */
describe('a fleet whose platform worker sandboxes its handlers', () => {
  const fleet = new TestFleet();
  let client: FleetClient;
  let server: Server;
  let hits = 0;
  let serverUrl = '';
  let metricsUrl = '';

  beforeAll(async () => {
    server = createServer((_req, res) => {
      hits += 1;
      res.end('reached');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.address();
    serverUrl = `http://127.0.0.1:${typeof address === 'object' && address !== null ? address.port : 0}/`;
    const metricsPort = await freePort();
    metricsUrl = `http://127.0.0.1:${metricsPort}/metrics`;
    await fleet.worker({ tier: 'platform', tools: join(ROOT, 'apps', 'worker', 'test', 'fixtures', 'sandbox-tools.ts'), env: { FORGE_SANDBOX: 'on', FORGE_SANDBOX_SIZE: '1', FORGE_METRICS_PORT: String(metricsPort) } });
    const dispatcher = await fleet.dispatcher({ FORGE_DEV_MODE: '0' });
    client = new FleetClient({ url: dispatcher.url, token: await fleet.token({ subject: 'sandbox-test' }) });
  });

  afterAll(async () => {
    await client?.close();
    await fleet.stopAll();
    await new Promise((resolve) => server.close(resolve));
  });

  it('runs ordinary handlers and returns their results', async () => {
    expect(await client.call('shout', { text: 'boxed' })).toMatchObject({ isError: false, content: 'BOXED' });
  });

  it('gives a handler no network, no environment and no child processes, and keeps serving', async () => {
    const fetched = await client.call('fetch', { url: serverUrl });
    expect(fetched.isError).toBe(true);
    expect(hits).toBe(0);
    expect(await client.call('env')).toMatchObject({ isError: false, structuredContent: {} });
    expect((await client.call('spawn')).isError).toBe(true);
    expect(await client.call('shout', { text: 'still here' })).toMatchObject({ isError: false, content: 'STILL HERE' });
    // The server itself was reachable all along, from outside the sandbox.
    expect(await (await fetch(serverUrl)).text()).toBe('reached');
  });

  it("counts sandbox processes started and stopped on the worker's /metrics", async () => {
    const counter = async (name: string, labels: Record<string, string> = {}): Promise<number> => sample(await (await fetch(metricsUrl)).text(), name, labels) ?? 0;
    const startedBefore = await counter('forge_sandbox_processes_started_total');
    expect(startedBefore).toBeGreaterThanOrEqual(1);
    expect((await client.call('crash')).isError).toBe(true);
    // The dead process is counted, and its replacement.
    await until('the replacement sandbox process to be counted', async () => (await counter('forge_sandbox_processes_started_total')) !== startedBefore);
    expect(await counter('forge_sandbox_processes_started_total')).toBe(startedBefore + 1);
    expect(await counter('forge_sandbox_processes_stopped_total', { reason: 'exited' })).toBeGreaterThanOrEqual(1);
  });

  it('refuses to start under --strict-sandbox where an isolation layer is missing, and only warns without it', async () => {
    // No PATH: `unshare` and `prlimit` cannot be found, so no namespaces (rlimits fall back to /bin/sh ulimit).
    const tools = join(ROOT, 'apps', 'worker', 'test', 'fixtures', 'sandbox-tools.ts');
    const env = { PATH: '/nonexistent', FORGE_SANDBOX: 'on', FORGE_SANDBOX_SIZE: '1' };
    const refusal = await fleet.worker({ tier: 'platform', tools, env: { ...env, FORGE_STRICT_SANDBOX: '1' } }).then(
      () => 'started',
      (error: unknown) => String(error),
    );
    expect(refusal).toMatch(/CONFIG_INVALID.*network namespace/s);
    const lenient = await fleet.worker({ tier: 'platform', tools, env: { ...env, FORGE_STRICT_SANDBOX: '0' } });
    expect(lenient.output()).toMatch(/sandbox layer not enforced on this machine/);
  });
});
