/**
 * `npm run bench`: the fleet side by side with raw BullMQ, on one machine, in
 * one run. Every point starts fresh processes on one shared redis-server:
 * agents (the callers), and the servers of the arm (raw: one BullMQ worker;
 * fleet: dispatcher(s) + one worker). Agents measure only inside a window the
 * orchestrator opens and closes with signals, while it reads CPU time from
 * /proc and Redis command counts from INFO commandstats.
 *
 * `--quick`: one repetition of shorter windows, for a smoke run.
 *
 * Besides the four points of both arms, fleet-only points measure what the
 * sandbox's process isolation costs (issue #15, item 4): 256 calls in flight
 * spread over 16 and 64 callers (token subjects: each gets sandbox processes
 * of its own), and a worker under `--sandbox-isolation call` (a process per
 * call), beside `inflight-256` and `inflight-16` of the same run.
 *
 * Four arms at the base points (issue #17: every entrance beside raw BullMQ,
 * against the same fleet processes): `raw-bullmq`; `fleet-http`, FleetClient's
 * call streams; `fleet-http-per-call`, one plain keep-alive `POST /v1/calls`
 * per call (http-agent.ts); `fleet-mcp`, the official MCP SDK client's
 * `tools/call` on the dispatcher's `/mcp` (fleet-mcp-agent.ts).
 *
 * The MCP points (`mcp-*`, issue #16; bench/src/mcp/) put the fleet serving
 * an existing MCP server beside the server reached directly over stdio and
 * through two gateways; they share this run's Redis, repetitions and results.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { freePort, startLocalRedis } from '@forge-fleet/local-redis';
import { Redis } from 'ioredis';
import { type McpRun, startMcpRun } from './mcp/run-mcp.js';
import { cpuMs, fleetSecrets, nodeArgsFor, peakRssMb, ROOT, sandboxFootprint, type Spawned, spawnNode, treeCpuMs, until } from './proc.js';
import { type WarmUp, WARMUP_CAP_MS, warmUpDone, warmUpEnv } from './warm-up.js';

const quick = process.argv.includes('--quick');
const REPS = Number(process.env.BENCH_REPS ?? (quick ? 1 : 3));
const WARMUP_MS = Number(process.env.BENCH_WARMUP_MS ?? (quick ? 500 : 1000));
/** Calls a point's agents make, between them, before its window (warm-up.ts). */
const WARMUP_CALLS = Number(process.env.BENCH_WARMUP_CALLS ?? (quick ? 1000 : 5000));
const WARM_UP: WarmUp = { ms: WARMUP_MS, calls: WARMUP_CALLS };
const WINDOW_MS = Number(process.env.BENCH_WINDOW_MS ?? (quick ? 1500 : 3000));
const WORKER_CONCURRENCY = 256;

const ALL_ARMS = ['raw-bullmq', 'fleet-http', 'fleet-http-per-call', 'fleet-mcp'] as const;
type Arm = (typeof ALL_ARMS)[number];
type FleetArm = Exclude<Arm, 'raw-bullmq'>;
/** The fleet arms' agents: each a process of its own, against the same dispatcher(s) and worker. */
const FLEET_AGENT: Record<FleetArm, string> = {
  'fleet-http': 'bench/src/fleet-agent.ts',
  'fleet-http-per-call': 'bench/src/http-agent.ts',
  'fleet-mcp': 'bench/src/fleet-mcp-agent.ts',
};
type Kind = 'agent' | 'dispatcher' | 'worker' | 'redis';
interface Point {
  readonly name: string;
  readonly inflight: number;
  readonly agents: number;
  readonly dispatchers: number;
  /** Distinct callers (token subjects) the calls are spread over, in turn. @defaultValue one (the agents' token) */
  readonly callers?: number;
  /** The worker's `--sandbox-isolation`. @defaultValue the worker's default (`caller`) */
  readonly isolation?: 'caller' | 'call';
  /** Measures the fleet only: raw BullMQ has no sandbox and no callers. */
  readonly fleetOnly?: boolean;
}
/** The points of every arm. */
const BASE_POINTS: readonly Point[] = [
  { name: 'inflight-1', inflight: 1, agents: 1, dispatchers: 1 },
  { name: 'inflight-16', inflight: 16, agents: 1, dispatchers: 1 },
  { name: 'inflight-256', inflight: 256, agents: 1, dispatchers: 1 },
  { name: 'fanout-16x16', inflight: 256, agents: 16, dispatchers: 2 },
];
const POINTS: readonly Point[] = [
  ...BASE_POINTS,
  { name: 'callers-16', inflight: 256, agents: 1, dispatchers: 1, callers: 16, fleetOnly: true },
  { name: 'callers-64', inflight: 256, agents: 1, dispatchers: 1, callers: 64, fleetOnly: true },
  { name: 'per-call-16', inflight: 16, agents: 1, dispatchers: 1, isolation: 'call', fleetOnly: true },
];
/** `BENCH_ARMS=fleet-http` measures only that arm (for A/B experiments between two builds). */
const ARMS: readonly Arm[] = ALL_ARMS.filter((a) => process.env.BENCH_ARMS?.split(',').includes(a) ?? true);
/** `BENCH_POINTS=inflight-256,fanout-16x16` measures only those points (for experiments; a check whose inputs were not measured is left out). */
const ONLY = process.env.BENCH_POINTS?.split(',');
const SELECTED = ONLY === undefined ? POINTS : POINTS.filter((p) => ONLY.includes(p.name));
/** The fleet-only points measure the sandbox under the stream arm alone: the other entrances add nothing to that question. */
const armsOf = (point: Point): readonly Arm[] => ARMS.filter((arm) => point.fleetOnly !== true || arm === 'fleet-http');

interface Sample {
  readonly callsPerSec: number;
  readonly p50: number;
  readonly p95: number;
  readonly p99: number;
  readonly errors: number;
  readonly cpuMsPerCall: Record<Kind, number> & { total: number; /** The worker's sandbox processes (part of `worker`). */ sandbox: number };
  readonly redisCmdsPerCall: number;
  readonly peakRssMb: { worker: number; dispatcher: number };
  /** The worker's sandbox processes as the window closed: how many, and their resident memory together. */
  readonly sandbox: { processes: number; rssMb: number };
}

interface Proc extends Spawned {
  readonly kind: Kind;
}

function start(kind: Kind, args: readonly string[], env: Record<string, string> = {}): Proc {
  return Object.assign(spawnNode(args, env), { kind });
}

async function stopAll(procs: readonly Proc[]): Promise<void> {
  await Promise.all(
    procs.map(
      (p) =>
        new Promise<void>((resolve) => {
          if (p.child.exitCode !== null || p.child.signalCode !== null) return resolve();
          const kill = setTimeout(() => p.child.kill('SIGKILL'), 3000);
          p.child.once('exit', () => {
            clearTimeout(kill);
            resolve();
          });
          p.child.kill('SIGTERM');
        }),
    ),
  );
}

async function commandCount(redis: Redis): Promise<number> {
  const info = await redis.info('commandstats');
  let total = 0;
  for (const m of info.matchAll(/calls=(\d+)/g)) total += Number(m[1]);
  return total;
}

const TSX = ['--conditions=forge-source', '--import', 'tsx'];

/** An agent's report line, once it has arrived whole. */
function reportLine(out: string): string | undefined {
  const start = out.indexOf('{"event":"report"');
  if (start === -1) return undefined;
  const end = out.indexOf('\n', start);
  return end === -1 ? undefined : out.slice(start, end);
}

/** One set of keys for the whole run: tokens verified and calls signed and checked, as in production. */
const SECRETS = await fleetSecrets('bench', Math.max(0, ...POINTS.map((p) => p.callers ?? 0)));

async function startServers(arm: Arm, point: Point, redisUrl: string): Promise<{ procs: Proc[]; urls: string[] }> {
  if (arm === 'raw-bullmq') {
    const worker = start('worker', [...TSX, 'bench/src/raw-worker.ts', redisUrl, 'bench', String(WORKER_CONCURRENCY)]);
    await until('raw worker', () => worker.out.includes('worker ready'));
    return { procs: [worker], urls: [] };
  }
  const env = { REDIS_URL: redisUrl, FORGE_PREFIX: 'bench', LOG_LEVEL: 'warn' };
  const signing = SECRETS;
  const procs: Proc[] = [];
  const urls: string[] = [];
  for (let i = 0; i < point.dispatchers; i++) {
    const port = await freePort();
    procs.push(start('dispatcher', [...(process.env.BENCH_DISPATCHER_FLAGS?.split(' ').filter(Boolean) ?? []), ...nodeArgsFor('apps/dispatcher/bin/forge-dispatcher.js')], { ...env, ...signing.dispatcher, PORT: String(port) }));
    urls.push(`http://127.0.0.1:${port}`);
  }
  procs.push(start('worker', [...(process.env.BENCH_WORKER_FLAGS?.split(' ').filter(Boolean) ?? []), ...nodeArgsFor('apps/worker/bin/forge-worker.js'), '--tier', 'platform', '--tools', 'bench/src/tools.ts', '--concurrency', String(WORKER_CONCURRENCY), ...(point.isolation === undefined ? [] : ['--sandbox-isolation', point.isolation])], { ...env, ...signing.platformWorker }));
  for (const url of urls) {
    await until(`dispatcher ${url} serving noop`, async () => {
      try {
        const body = (await (await fetch(`${url}/v1/tools`, { headers: { authorization: `Bearer ${SECRETS.agent.FORGE_TOKEN}` } })).json()) as { tools?: { name: string }[] };
        return body.tools?.some((t) => t.name === 'noop') === true;
      } catch {
        return false;
      }
    });
  }
  return { procs, urls };
}

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

async function measure(arm: Arm, point: Point, redisUrl: string, redisPid: number, redis: Redis): Promise<Sample> {
  await redis.flushall();
  const { procs, urls } = await startServers(arm, point, redisUrl);
  const agents: Proc[] = [];
  try {
    const per = Math.max(1, Math.round(point.inflight / point.agents));
    for (let i = 0; i < point.agents; i++) {
      const args = arm === 'raw-bullmq' ? [...TSX, 'bench/src/raw-agent.ts', redisUrl, 'bench', String(per)] : [...TSX, FLEET_AGENT[arm], urls[i % urls.length]!, String(per)];
      const callers = point.callers === undefined ? {} : { FORGE_TOKENS: SECRETS.callerTokens.slice(0, point.callers).join(',') };
      agents.push(start('agent', args, { ...warmUpEnv(WARM_UP, point.agents), ...(arm === 'raw-bullmq' ? {} : { ...SECRETS.agent, ...callers }) }));
    }
    await until('agents ready', () => agents.every((a) => a.out.includes('"event":"ready"')));
    // Many agent processes on two cores need longer to finish JIT-compiling before the numbers mean anything.
    // Each caller's sandbox process starts on its first call (this machine starts a few a second): measured once all run.
    const callers = point.callers ?? 1;
    const worker = procs.find((p) => p.kind === 'worker');
    if (callers > 1 && worker !== undefined) await until(`a sandbox process for each of ${callers} callers`, () => sandboxFootprint(worker.child.pid!).processes >= callers, 180_000);
    await warmUpDone(WARM_UP, () => agents.map((a) => a.out), point.agents > 1 || callers > 1 ? WARMUP_MS * 4 : WARMUP_MS);

    const all = [...procs, ...agents];
    // A worker's figure includes its sandbox processes.
    const cpuBefore = all.map((p) => treeCpuMs(p.child.pid!));
    const ownBefore = all.map((p) => cpuMs(p.child.pid!));
    const redisCpuBefore = cpuMs(redisPid);
    const cmdsBefore = await commandCount(redis);
    for (const a of agents) a.child.kill('SIGUSR1');
    const t0 = performance.now();
    await new Promise((r) => setTimeout(r, WINDOW_MS));
    const cmdsAfter = await commandCount(redis);
    const cpuAfter = all.map((p) => treeCpuMs(p.child.pid!));
    const ownAfter = all.map((p) => cpuMs(p.child.pid!));
    const redisCpuAfter = cpuMs(redisPid);
    const sandbox = worker === undefined ? { processes: 0, rssMb: 0 } : sandboxFootprint(worker.child.pid!);
    for (const a of agents) a.child.kill('SIGUSR2');
    const windowMs = performance.now() - t0;
    // A report is one long line (every latency); it is complete only once its newline has arrived.
    await until('agent reports', () => agents.every((a) => reportLine(a.out) !== undefined));

    let calls = 0;
    let errors = 0;
    const latencies: number[] = [];
    for (const a of agents) {
      const line = reportLine(a.out)!;
      const report = JSON.parse(line) as { calls: number; errors: number; latenciesMs: number[] };
      calls += report.calls;
      errors += report.errors;
      for (const l of report.latenciesMs) latencies.push(l);
    }
    latencies.sort((a, b) => a - b);
    const cpu: Record<Kind, number> = { agent: 0, dispatcher: 0, worker: 0, redis: redisCpuAfter - redisCpuBefore };
    all.forEach((p, i) => (cpu[p.kind] += cpuAfter[i]! - cpuBefore[i]!));
    // What a worker's child processes used: its sandbox (raw BullMQ's worker has none).
    let sandboxCpu = 0;
    all.forEach((p, i) => {
      if (p.kind === 'worker') sandboxCpu += cpuAfter[i]! - cpuBefore[i]! - (ownAfter[i]! - ownBefore[i]!);
    });
    const perCall = (v: number): number => (calls === 0 ? Number.NaN : v / calls);
    const rss = (kind: Kind): number => Math.max(0, ...procs.filter((p) => p.kind === kind).map((p) => peakRssMb(p.child.pid!)));
    return {
      callsPerSec: calls / (windowMs / 1000),
      p50: percentile(latencies, 50),
      p95: percentile(latencies, 95),
      p99: percentile(latencies, 99),
      errors,
      cpuMsPerCall: {
        agent: perCall(cpu.agent),
        dispatcher: perCall(cpu.dispatcher),
        worker: perCall(cpu.worker),
        redis: perCall(cpu.redis),
        total: perCall(cpu.agent + cpu.dispatcher + cpu.worker + cpu.redis),
        sandbox: perCall(sandboxCpu),
      },
      redisCmdsPerCall: perCall(cmdsAfter - cmdsBefore),
      peakRssMb: { worker: rss('worker'), dispatcher: rss('dispatcher') },
      sandbox,
    };
  } finally {
    await stopAll([...agents, ...procs]);
  }
}

const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? Number.NaN : s.length % 2 === 1 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

interface Summary {
  readonly point: string;
  readonly arm: Arm;
  readonly median: Sample;
  readonly spread: { callsPerSec: [number, number]; p50: [number, number]; p99: [number, number] };
  readonly reps: Sample[];
}

function summarise(point: string, arm: Arm, reps: Sample[]): Summary {
  const m = (f: (s: Sample) => number): number => median(reps.map(f));
  const range = (f: (s: Sample) => number): [number, number] => [Math.min(...reps.map(f)), Math.max(...reps.map(f))];
  return {
    point,
    arm,
    reps,
    median: {
      callsPerSec: m((s) => s.callsPerSec),
      p50: m((s) => s.p50),
      p95: m((s) => s.p95),
      p99: m((s) => s.p99),
      errors: m((s) => s.errors),
      cpuMsPerCall: {
        agent: m((s) => s.cpuMsPerCall.agent),
        dispatcher: m((s) => s.cpuMsPerCall.dispatcher),
        worker: m((s) => s.cpuMsPerCall.worker),
        redis: m((s) => s.cpuMsPerCall.redis),
        total: m((s) => s.cpuMsPerCall.total),
        sandbox: m((s) => s.cpuMsPerCall.sandbox),
      },
      redisCmdsPerCall: m((s) => s.redisCmdsPerCall),
      peakRssMb: { worker: m((s) => s.peakRssMb.worker), dispatcher: m((s) => s.peakRssMb.dispatcher) },
      sandbox: { processes: m((s) => s.sandbox.processes), rssMb: m((s) => s.sandbox.rssMb) },
    },
    spread: { callsPerSec: range((s) => s.callsPerSec), p50: range((s) => s.p50), p99: range((s) => s.p99) },
  };
}

const f = (n: number, digits = 2): string => (Number.isNaN(n) ? '–' : n.toFixed(digits));

function table(summaries: readonly Summary[]): string {
  const rows = [
    '| point | arm | calls/s (min–max) | p50 ms | p95 ms | p99 ms | CPU ms/call agent · disp · worker (sandbox) · redis = total | Redis cmds/call | peak RSS MB worker · disp | sandbox processes · RSS MB |',
    '|---|---|---|---|---|---|---|---|---|---|',
  ];
  for (const s of summaries) {
    const m = s.median;
    const c = m.cpuMsPerCall;
    const fleet = s.arm !== 'raw-bullmq';
    rows.push(
      `| ${s.point} | ${s.arm} | ${f(m.callsPerSec, 0)} (${f(s.spread.callsPerSec[0], 0)}–${f(s.spread.callsPerSec[1], 0)}) | ${f(m.p50)} | ${f(m.p95)} | ${f(m.p99)} | ${f(c.agent, 3)} · ${f(c.dispatcher, 3)} · ${f(c.worker, 3)} (${f(c.sandbox, 3)}) · ${f(c.redis, 3)} = ${f(c.total, 3)} | ${f(m.redisCmdsPerCall, 1)} | ${f(m.peakRssMb.worker, 0)} · ${fleet ? f(m.peakRssMb.dispatcher, 0) : '–'} | ${fleet ? `${f(m.sandbox.processes, 0)} · ${f(m.sandbox.rssMb, 0)}` : '–'} |`,
    );
  }
  return rows.join('\n');
}

interface Check {
  readonly target: string;
  readonly fleet: number;
  readonly bar: number;
  readonly met: boolean;
}

/**
 * The issues' bars, each computed from this run's medians and left out when a
 * partial run did not measure what it compares. Issue #4's on the stream arm
 * (`fleet-http`) keep their names, so runs stay comparable; issue #17's name
 * the entrance they measure.
 */
function checks(summaries: readonly Summary[]): Check[] {
  const get = (point: string, arm: Arm): Sample | undefined => summaries.find((s) => s.point === point && s.arm === arm && s.reps.length > 0)?.median;
  const out: Check[] = [];
  const add = (target: string, fleet: number, bar: number, met: (fleet: number, bar: number) => boolean): void => void out.push({ target, fleet, bar, met: met(fleet, bar) });
  const atLeast = (a: number, b: number): boolean => a >= b;
  const atMost = (a: number, b: number): boolean => a <= b;
  const below = (a: number, b: number): boolean => a < b;
  const raw256 = get('inflight-256', 'raw-bullmq');
  const fleet256 = get('inflight-256', 'fleet-http');
  const raw1 = get('inflight-1', 'raw-bullmq');
  const fleet1 = get('inflight-1', 'fleet-http');
  const fleetFan = get('fanout-16x16', 'fleet-http');
  const perCall256 = get('inflight-256', 'fleet-http-per-call');
  const mcp256 = get('inflight-256', 'fleet-mcp');
  const rawFan = get('fanout-16x16', 'raw-bullmq');

  if (fleet256 !== undefined && raw256 !== undefined) add('calls/s at 256 in flight ≥ 1.2 × raw', fleet256.callsPerSec, 1.2 * raw256.callsPerSec, atLeast);
  if (fleet1 !== undefined && raw1 !== undefined) add('p50 at 1 in flight ≤ raw (ms)', fleet1.p50, raw1.p50, atMost);
  if (fleet256 !== undefined && raw256 !== undefined) {
    add('p99 at 256 in flight ≤ raw (ms)', fleet256.p99, raw256.p99, atMost);
    add('total CPU ms/call at 256 ≤ raw', fleet256.cpuMsPerCall.total, raw256.cpuMsPerCall.total, atMost);
    add('Redis commands/call at 256 ≤ raw', fleet256.redisCmdsPerCall, raw256.redisCmdsPerCall, atMost);
  }
  if (fleetFan !== undefined && fleet256 !== undefined) {
    add('fan-out calls/s ≥ 0.9 × 1-agent calls/s', fleetFan.callsPerSec, 0.9 * fleet256.callsPerSec, atLeast);
    add('fan-out Redis CPU/call < 1.1 × 1-agent', fleetFan.cpuMsPerCall.redis, 1.1 * fleet256.cpuMsPerCall.redis, below);
  }
  if (fleet256 !== undefined) {
    add('worker peak RSS at 256 < 150 MB', fleet256.peakRssMb.worker, 150, below);
    add('dispatcher peak RSS at 256 < 200 MB', fleet256.peakRssMb.dispatcher, 200, below);
  }

  // Issue #17: every entrance fast.
  if (perCall256 !== undefined && raw256 !== undefined) {
    add('http-per-call calls/s at 256 ≥ 1.2 × raw', perCall256.callsPerSec, 1.2 * raw256.callsPerSec, atLeast);
    add('http-per-call p99 at 256 ≤ raw (ms)', perCall256.p99, raw256.p99, atMost);
  }
  if (mcp256 !== undefined && perCall256 !== undefined) {
    add('mcp calls/s at 256 ≥ 0.8 × http-per-call', mcp256.callsPerSec, 0.8 * perCall256.callsPerSec, atLeast);
    add('mcp p99 at 256 ≤ 2 × http-per-call p99 (ms)', mcp256.p99, 2 * perCall256.p99, atMost);
  }
  if (mcp256 !== undefined) add('mcp dispatcher CPU ms/call at 256 ≤ 0.25', mcp256.cpuMsPerCall.dispatcher, 0.25, atMost);
  if (raw1 !== undefined) {
    for (const arm of ['fleet-http', 'fleet-http-per-call', 'fleet-mcp'] as const) {
      const at1 = get('inflight-1', arm);
      if (at1 === undefined) continue;
      add(`${arm} p50 at 1 in flight ≤ 2 × raw (ms)`, at1.p50, 2 * raw1.p50, atMost);
      add(`${arm} total CPU ms/call at 1 ≤ 2 × raw`, at1.cpuMsPerCall.total, 2 * raw1.cpuMsPerCall.total, atMost);
    }
  }
  for (const arm of ['fleet-http-per-call', 'fleet-mcp'] as const) {
    const at256 = get('inflight-256', arm);
    if (at256 === undefined) continue;
    add(`${arm} worker peak RSS at 256 < 150 MB`, at256.peakRssMb.worker, 150, below);
    add(`${arm} dispatcher peak RSS at 256 < 200 MB`, at256.peakRssMb.dispatcher, 200, below);
  }
  if (fleetFan !== undefined && rawFan !== undefined) add('fan-out calls/s > raw (stream arm)', fleetFan.callsPerSec, rawFan.callsPerSec, (a, b) => a > b);
  return out;
}

const redisServer = await startLocalRedis();
const redis = new Redis(redisServer.url);
let mcp: McpRun | undefined;
try {
  mcp = await startMcpRun({ redisUrl: redisServer.url, redisPid: redisServer.pid, redis, warmUp: WARM_UP, windowMs: WINDOW_MS, env: process.env });
  const samples = new Map<string, Sample[]>();
  for (let rep = 1; rep <= REPS; rep++) {
    for (const point of SELECTED) {
      // Arms alternate within each point so slow drift of a noisy machine hits both alike.
      for (const arm of rep % 2 === 1 ? armsOf(point) : [...armsOf(point)].reverse()) {
        const sample = await measure(arm, point, redisServer.url, redisServer.pid, redis);
        const key = `${point.name}|${arm}`;
        samples.set(key, [...(samples.get(key) ?? []), sample]);
        process.stdout.write(`rep ${rep} ${point.name.padEnd(13)} ${arm.padEnd(19)} ${f(sample.callsPerSec, 0).padStart(6)} calls/s  p50 ${f(sample.p50)} ms  p99 ${f(sample.p99)} ms  errors ${sample.errors}\n`);
      }
    }
    for (const point of mcp.points) {
      for (const arm of rep % 2 === 1 ? mcp.armsOf(point) : [...mcp.armsOf(point)].reverse()) {
        const sample = await mcp.measure(arm, point);
        process.stdout.write(`rep ${rep} ${point.name.padEnd(13)} ${arm.padEnd(16)} ${f(sample.callsPerSec, 0).padStart(6)} calls/s  p50 ${f(sample.p50)} ms  p99 ${f(sample.p99)} ms  errors ${sample.errors}\n`);
      }
    }
  }
  const summaries = SELECTED.flatMap((p) => armsOf(p).map((arm) => summarise(p.name, arm, samples.get(`${p.name}|${arm}`) ?? [])));
  const results = checks(summaries);
  const mcpResults = mcp.results();
  const allChecks = [...results, ...mcpResults.checks];
  const date = new Date().toISOString().slice(0, 10);
  const redisVersion = /redis_version:(\S+)/.exec(await redis.info('server'))?.[1];
  const bullmqVersion = (JSON.parse(readFileSync(join(ROOT, 'node_modules/bullmq/package.json'), 'utf8')) as { version: string }).version;
  const meta = { date: new Date().toISOString(), quick, reps: REPS, warmupMs: WARMUP_MS, warmupCalls: WARMUP_CALLS, windowMs: WINDOW_MS, workerConcurrency: WORKER_CONCURRENCY, node: process.version, cpus: cpus().length, redis: redisVersion, bullmq: bullmqVersion };
  const markdown = [
    `# Benchmark ${meta.date}${quick ? ' (quick)' : ''}`,
    '',
    `Node ${meta.node}, ${meta.cpus} cores, Redis ${meta.redis}, BullMQ ${meta.bullmq}; ${REPS} repetition(s) of ${WINDOW_MS} ms windows after a warm-up of at least ${WARMUP_MS} ms (4× that for the fan-out point) and ${WARMUP_CALLS} calls (at most ${WARMUP_CAP_MS / 1000} s); one worker process (concurrency ${WORKER_CONCURRENCY}) per arm; medians, calls/s spread in brackets. Fleet processes log at \`warn\`. Fleet arms, against the same dispatcher(s) and worker: \`fleet-http\` (FleetClient's call streams), \`fleet-http-per-call\` (one \`POST /v1/calls?wait\` per call, undici keep-alive pool of one connection per call in flight), \`fleet-mcp\` (official MCP SDK client, \`tools/call\` on \`/mcp\`, undici fetch with the same pool size). Fleet-only points (stream arm only): \`callers-N\` spreads 256 calls in flight over N token subjects (each gets sandbox processes of its own); \`per-call-16\` runs the worker under \`--sandbox-isolation call\` (a sandbox process per call).`,
    '',
    table(summaries),
    '',
    ...(mcpResults.markdown === '' ? [] : [mcpResults.markdown]),
    '| target | fleet | bar | met |',
    '|---|---|---|---|',
    ...allChecks.map((c) => `| ${c.target} | ${f(c.fleet)} | ${f(c.bar)} | ${c.met ? 'yes' : 'no'} |`),
    '',
  ].join('\n');
  // BENCH_RESULTS_DIR: an experiment's results elsewhere (bench/results holds the committed runs).
  const dir = process.env.BENCH_RESULTS_DIR ?? join(ROOT, 'bench', 'results');
  mkdirSync(dir, { recursive: true });
  // Runs of some points or arms are experiments: kept apart from (and never mistaken for) a full run's results.
  const partial = SELECTED.length !== POINTS.length || ARMS.length !== ALL_ARMS.length || !mcp.complete;
  const name = `${date}${quick ? '-quick' : ''}${partial ? '-partial' : ''}`;
  writeFileSync(join(dir, `${name}.json`), `${JSON.stringify({ meta, summaries, mcp: mcpResults.summaries, checks: allChecks }, null, 2)}\n`);
  writeFileSync(join(dir, `${name}.md`), markdown);
  process.stdout.write(`\n${markdown}\nwritten: ${join(dir, `${name}.json`)}, ${join(dir, `${name}.md`)}\n`);
} finally {
  await mcp?.stop();
  redis.disconnect();
  await redisServer.stop();
}
