/**
 * `npm run bench:trace`: the Redis commands of single calls, as `MONITOR`
 * sees them (microsecond timestamps, which connection sent what), after a
 * warm-up. Shows the serial hops of one call at 1 in flight: which step waits
 * for which, and how long each gap is.
 */
import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { FleetClient } from '@forge-fleet/client';
import { freePort, startLocalRedis } from '@forge-fleet/local-redis';
import { nodeArgsFor, fleetSecrets } from './proc.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const CALLS = Number(process.env.TRACE_CALLS ?? 3);
const redis = await startLocalRedis();
const env = { ...process.env, REDIS_URL: redis.url, FORGE_PREFIX: 'trace', LOG_LEVEL: 'warn' };
const signing = await fleetSecrets(env.FORGE_PREFIX);
const port = await freePort();
const dispatcher = spawn(process.execPath, nodeArgsFor('apps/dispatcher/bin/forge-dispatcher.js'), { cwd: ROOT, env: { ...env, ...signing.dispatcher, PORT: String(port) }, stdio: 'inherit' });
const worker = spawn(process.execPath, [...nodeArgsFor('apps/worker/bin/forge-worker.js'), '--tier', 'platform', '--tools', 'bench/src/tools.ts', '--concurrency', '256'], { cwd: ROOT, env: { ...env, ...signing.platformWorker }, stdio: 'inherit' });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
try {
  const client = new FleetClient({ url: `http://127.0.0.1:${port}`, token: signing.agent.FORGE_TOKEN! });
  for (;;) {
    const tools = await client.tools().catch(() => []);
    if (tools.some((t) => t.name === 'noop')) break;
    await sleep(50);
  }
  for (let i = 0; i < 2000; i++) await client.call('noop', {});
  const monitor = spawn('redis-cli', ['-u', redis.url, 'monitor'], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  monitor.stdout.on('data', (b: Buffer) => (out += b.toString()));
  await sleep(300);
  const latencies: string[] = [];
  for (let i = 0; i < CALLS; i++) {
    const began = performance.now();
    await client.call('noop', {});
    latencies.push((performance.now() - began).toFixed(2));
    // Keep the calls apart in the trace; the BullMQ worker's housekeeping shows up between them.
    await sleep(100);
  }
  await sleep(200);
  monitor.kill();
  process.stdout.write(`${out.split('\n').map((l) => l.slice(0, 180)).join('\n')}\nlatency ms (with MONITOR on, which slows Redis): ${latencies.join(', ')}\n`);
} finally {
  dispatcher.kill('SIGTERM');
  worker.kill('SIGTERM');
  await sleep(1000);
  await redis.stop();
}
