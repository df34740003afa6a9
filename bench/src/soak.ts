/**
 * `npm run soak`: 100,000 calls (SOAK_CALLS) at the benchmark's concurrency
 * (256 in flight) through a real dispatcher and a sandboxed platform worker,
 * on a redis-server of its own. Checks that every call gets exactly one
 * answer, and the right one (each result echoes its call id and argument);
 * that the worker executed each call once (its own /metrics count); and
 * samples Redis memory and process memory as it goes, to show Redis memory
 * bounded by the retention setting and process memory flat.
 * Writes bench/results/soak-<date>.json (or SOAK_OUT) and prints a summary;
 * exits 1 when a call was lost, answered twice or wrongly, failed, or ran
 * other than once. SOAK_FROM_SOURCE=1 runs the apps from their TypeScript
 * sources (as the tests do) instead of the built bins.
 */
import { randomUUID } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { FleetClient } from '@forge-fleet/client';
import { freePort, startLocalRedis } from '@forge-fleet/local-redis';
import { Redis } from 'ioredis';
import { fleetSecrets, nodeArgsFor, ROOT, rssMb, spawnNode, until } from './proc.js';

const CALLS = Number(process.env.SOAK_CALLS ?? 100_000);
const INFLIGHT = Number(process.env.SOAK_INFLIGHT ?? 256);
/** Short, so that a 100k run outlives it several times and the records' expiry shows in Redis memory. */
const RETENTION_MS = Number(process.env.SOAK_RETENTION_MS ?? 20_000);
const SAMPLE_MS = 2000;
const FROM_SOURCE = process.env.SOAK_FROM_SOURCE === '1';

/** How to start an app: its built bin (as shipped), or its source through tsx. */
function appArgs(app: 'dispatcher' | 'worker'): string[] {
  return FROM_SOURCE ? ['--conditions=forge-source', '--import', 'tsx', `apps/${app}/src/main.ts`] : nodeArgsFor(`apps/${app}/bin/forge-${app}.js`);
}

const redisServer = await startLocalRedis();
const secrets = await fleetSecrets('soak');
const port = await freePort();
const metricsPort = await freePort();
const url = `http://127.0.0.1:${port}`;
const env = { REDIS_URL: redisServer.url, FORGE_PREFIX: 'soak', LOG_LEVEL: 'warn', FORGE_RESULT_RETENTION_MS: String(RETENTION_MS) };
const dispatcher = spawnNode(appArgs('dispatcher'), { ...env, ...secrets.dispatcher, PORT: String(port) });
const worker = spawnNode([...appArgs('worker'), '--tier', 'platform', '--tools', 'bench/src/tools.ts', '--concurrency', '256'], {
  ...env,
  ...secrets.platformWorker,
  FORGE_METRICS_PORT: String(metricsPort),
  FORGE_METRICS_HOST: '127.0.0.1',
});
const redis = new Redis(redisServer.url);
const client = new FleetClient({ url, token: secrets.agent.FORGE_TOKEN! });
const samples: { atS: number; done: number; redisUsedMb: number; keys: number; dispatcherRssMb: number; workerRssMb: number }[] = [];
let done = 0;
let wrong = 0;
let failed = 0;
let thrown = 0;
const errors = new Map<string, number>();
const answered = new Set<string>();
let duplicates = 0;

try {
  await until('the worker serving echo_id', async () => {
    const body = (await (await fetch(`${url}/v1/tools`, { headers: { authorization: `Bearer ${secrets.agent.FORGE_TOKEN}` } })).json()) as { tools?: { name: string }[] };
    return body.tools?.some((t) => t.name === 'echo_id') === true;
  }, 60_000);
  const began = Date.now();
  const sample = async (): Promise<void> => {
    const memory = await redis.info('memory');
    samples.push({
      atS: Math.round((Date.now() - began) / 100) / 10,
      done,
      redisUsedMb: Math.round((Number(/used_memory:(\d+)/.exec(memory)?.[1] ?? 0) / 1048576) * 10) / 10,
      keys: await redis.dbsize(),
      dispatcherRssMb: Math.round(rssMb(dispatcher.child.pid!)),
      workerRssMb: Math.round(rssMb(worker.child.pid!)),
    });
  };
  const sampler = setInterval(() => void sample(), SAMPLE_MS);
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < CALLS) {
      const n = next++;
      const id = `soak-${n}-${randomUUID()}`;
      try {
        const result = await client.call('echo_id', { n }, { id, timeoutMs: 120_000 });
        if (answered.has(id)) duplicates++;
        answered.add(id);
        if (result.isError) {
          failed++;
          errors.set(result.error?.code ?? 'unknown', (errors.get(result.error?.code ?? 'unknown') ?? 0) + 1);
        } else if (result.structuredContent?.id !== id || result.structuredContent?.n !== n) {
          wrong++;
        }
      } catch (error) {
        thrown++;
        failed++;
        const code = (error as { code?: string }).code ?? String(error);
        errors.set(code, (errors.get(code) ?? 0) + 1);
      }
      done++;
    }
  };
  await Promise.all(Array.from({ length: INFLIGHT }, lane));
  const seconds = (Date.now() - began) / 1000;
  await sample();
  // After the retention time, the records of the run have expired: what Redis holds then is the fleet's steady state.
  await new Promise((r) => setTimeout(r, RETENTION_MS + 3000));
  await sample();
  clearInterval(sampler);
  const metrics = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  const executed = Number(/^forge_call_execution_seconds_count\{[^}]*tool="echo_id"[^}]*\} (\d+)/m.exec(metrics)?.[1] ?? -1);
  const completedByWorker = Number(/^forge_calls_total\{[^}]*tool="echo_id"[^}]*outcome="completed"[^}]*\} (\d+)/m.exec(metrics)?.[1] ?? -1);
  const during = samples.slice(0, -1);
  const fifth = during[Math.floor(during.length / 5)] ?? during[0]!;
  const result = {
    date: new Date().toISOString(),
    calls: CALLS,
    inflight: INFLIGHT,
    retentionMs: RETENTION_MS,
    seconds: Math.round(seconds * 10) / 10,
    callsPerSec: Math.round(CALLS / seconds),
    answered: answered.size,
    // Calls that got neither a result nor an error: none may exist.
    lost: CALLS - answered.size - thrown,
    duplicates,
    wrongResults: wrong,
    failed,
    errors: Object.fromEntries(errors),
    executedByWorker: executed,
    completedByWorker,
    redisUsedMb: { peak: Math.max(...samples.map((s) => s.redisUsedMb)), atEnd: during.at(-1)?.redisUsedMb, afterRetention: samples.at(-1)?.redisUsedMb },
    rssMb: {
      dispatcher: { atOneFifth: fifth.dispatcherRssMb, atEnd: during.at(-1)?.dispatcherRssMb, peak: Math.max(...samples.map((s) => s.dispatcherRssMb)) },
      worker: { atOneFifth: fifth.workerRssMb, atEnd: during.at(-1)?.workerRssMb, peak: Math.max(...samples.map((s) => s.workerRssMb)) },
    },
    samples,
  };
  const file = process.env.SOAK_OUT ?? join(ROOT, 'bench', 'results', `soak-${result.date.slice(0, 10)}.json`);
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, `${JSON.stringify(result, null, 2)}\n`);
  const { samples: _all, ...summary } = result;
  process.stdout.write(`${JSON.stringify(summary, null, 2)}\nwritten: ${file}\n`);
  if (answered.size !== CALLS || duplicates > 0 || wrong > 0 || failed > 0 || executed !== CALLS) process.exitCode = 1;
} finally {
  await client.close();
  redis.disconnect();
  for (const { child } of [dispatcher, worker]) child.kill('SIGTERM');
  await new Promise((r) => setTimeout(r, 1500));
  await redisServer.stop();
}
