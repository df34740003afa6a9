/**
 * One sample of an MCP point's arm: fresh processes (gateway or fleet, then
 * the agent), a warm-up, a measuring window opened and closed with signals
 * (agent-loop.ts), CPU per process kind and peak RSS from /proc, Redis
 * commands from INFO commandstats — as run.ts measures its own points.
 */
import type { Redis } from 'ioredis';
import { type Spawned, spawnNode, until } from '../proc.js';
import { type WarmUp, warmUpDone, warmUpEnv } from '../warm-up.js';
import { type McpFleetSecrets, SERVER_NAME, serverProcessesOf, startDispatcher, startWorker, waitServing, writeServersFile } from './fleet.js';
import { startGateway } from './gateways.js';
import { type McpArm, type McpPoint, workersOf } from './points.js';
import { classify, cpuByKind, cpuSnapshot, MCP_KINDS, type McpKind, peakRssByKind, type Root } from './process-kinds.js';

export interface McpSample {
  readonly callsPerSec: number;
  readonly p50: number;
  readonly p95: number;
  readonly p99: number;
  readonly errors: number;
  readonly cpuMsPerCall: Record<McpKind, number> & { total: number };
  readonly redisCmdsPerCall: number;
  /** The largest peak RSS of one process of each kind, in MB. */
  readonly peakRssMb: Record<McpKind, number>;
  /** server-everything processes as the window closed. */
  readonly serverProcesses: number;
}

/** What every sample of a run shares. */
export interface McpContext {
  readonly redisUrl: string;
  readonly redisPid: number;
  readonly redis: Redis;
  readonly secrets: McpFleetSecrets;
  /** The scale point's gzip body (blob-server.ts). */
  readonly blobUrl: string;
  readonly warmUp: WarmUp;
  readonly windowMs: number;
  /** Run the fleet from its TypeScript sources rather than the built bins. */
  readonly fromSource: boolean;
}

const TSX = ['--conditions=forge-source', '--import', 'tsx'];

interface Started extends Spawned {
  readonly kind: McpKind;
}

async function commandCount(redis: Redis): Promise<number> {
  const info = await redis.info('commandstats');
  let total = 0;
  for (const m of info.matchAll(/calls=(\d+)/g)) total += Number(m[1]);
  return total;
}

/** Ends processes with SIGTERM (SIGKILL after 5 s: a gateway or worker stops its servers first). */
export async function stopAll(procs: readonly Spawned[]): Promise<void> {
  await Promise.all(
    procs.map(
      (p) =>
        new Promise<void>((resolve) => {
          if (p.child.exitCode !== null || p.child.signalCode !== null) return resolve();
          const kill = setTimeout(() => p.child.kill('SIGKILL'), 5000);
          p.child.once('exit', () => {
            clearTimeout(kill);
            resolve();
          });
          p.child.kill('SIGTERM');
        }),
    ),
  );
}

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

/** An agent's report line, once it has arrived whole. */
function reportLine(out: string): string | undefined {
  const start = out.indexOf('{"event":"report"');
  if (start === -1) return undefined;
  const end = out.indexOf('\n', start);
  return end === -1 ? undefined : out.slice(start, end);
}

/** Starts what the arm serves the server with; returns those processes and the agent's command line. */
async function startArm(arm: McpArm, point: McpPoint, ctx: McpContext): Promise<{ procs: Started[]; agentArgs: string[]; agentEnv: Record<string, string> }> {
  const call = point.call === 'echo' ? 'echo' : `gzip:${ctx.blobUrl}`;
  const inflight = String(point.inflight);
  if (arm === 'mcp-direct') return { procs: [], agentArgs: ['stdio', inflight, call], agentEnv: {} };
  if (arm === 'mcp-proxy' || arm === 'mcp-supergateway') {
    const gateway = await startGateway(arm === 'mcp-proxy' ? 'mcp-proxy' : 'supergateway');
    return { procs: [asKind(gateway.proc, 'gateway')], agentArgs: ['http', gateway.url, inflight, call], agentEnv: {} };
  }
  const serversFile = writeServersFile(point.serving);
  const dispatcher = await startDispatcher(ctx.redisUrl, ctx.secrets, { fromSource: ctx.fromSource });
  const workers = Array.from({ length: workersOf(arm) }, () => startWorker(ctx.redisUrl, ctx.secrets, { serversFile, concurrency: point.workerConcurrency, fromSource: ctx.fromSource }));
  const procs: Started[] = [asKind(dispatcher.proc, 'dispatcher'), ...workers.map((w) => asKind(w, 'worker'))];
  try {
    const tool = `${SERVER_NAME}.${point.call === 'echo' ? 'echo' : 'gzip-file-as-resource'}`;
    await waitServing(dispatcher.url, ctx.secrets.agentToken, tool, workers, point.serving.instances);
  } catch (error) {
    await stopAll(procs);
    throw new Error(`${arm}: ${error instanceof Error ? error.message : String(error)}\ndispatcher: ${dispatcher.proc.out.slice(-800)}\nworker: ${workers[0]?.out.slice(-800) ?? ''}`, { cause: error });
  }
  return { procs, agentArgs: ['fleet', dispatcher.url, inflight, call], agentEnv: { FORGE_TOKEN: ctx.secrets.agentToken } };
}

/** Keeps the object `spawnNode` returned (its `out` is updated in place) and tags it with its kind. */
function asKind(p: Spawned, kind: McpKind): Started {
  return Object.assign(p, { kind });
}

/** Measures one arm of one MCP point once. */
export async function measureMcp(arm: McpArm, point: McpPoint, ctx: McpContext): Promise<McpSample> {
  await ctx.redis.flushall();
  const { procs, agentArgs, agentEnv } = await startArm(arm, point, ctx);
  // The CPU-bound point's calls cost ~20 ms of server CPU each: thousands of them would add minutes, and the
  // fleet's own path is not what it measures. The others warm up by calls as the base points do (warm-up.ts).
  const warmUp = point.call === 'gzip' ? { ...ctx.warmUp, calls: 0 } : ctx.warmUp;
  const agent = asKind(spawnNode([...TSX, 'bench/src/mcp/mcp-agent.ts', ...agentArgs], { ...agentEnv, ...warmUpEnv(warmUp, 1) }), 'agent');
  const all = [...procs, agent];
  try {
    await until('the MCP agent ready', () => {
      if (agent.child.exitCode !== null) throw new Error(`agent exited: ${agent.out.slice(-800)}`);
      return agent.out.includes('"event":"ready"');
    }, 60_000);
    await warmUpDone(warmUp, () => [agent.out]);

    const roots: Root[] = [...all.map((p) => ({ pid: p.child.pid!, kind: p.kind })), { pid: ctx.redisPid, kind: 'redis' }];
    const kindsBefore = classify(roots);
    const before = cpuSnapshot(kindsBefore);
    const cmdsBefore = await commandCount(ctx.redis);
    agent.child.kill('SIGUSR1');
    const t0 = performance.now();
    await new Promise((r) => setTimeout(r, ctx.windowMs));
    const cmdsAfter = await commandCount(ctx.redis);
    // Processes born in the window (a restarted instance) count too: kinds from both ends.
    const kinds = new Map([...kindsBefore, ...classify(roots)]);
    const after = cpuSnapshot(kinds);
    agent.child.kill('SIGUSR2');
    const windowMs = performance.now() - t0;
    const rss = peakRssByKind(kinds);
    const servers = [...kinds].filter(([pid, kind]) => kind === 'server' && after.has(pid)).length;
    const fleetServers = procs.filter((p) => p.kind === 'worker').reduce((sum, w) => sum + serverProcessesOf(w.child.pid!).length, 0);
    await until('the MCP agent report', () => reportLine(agent.out) !== undefined);

    const report = JSON.parse(reportLine(agent.out)!) as { calls: number; errors: number; latenciesMs: number[] };
    const latencies = [...report.latenciesMs].sort((a, b) => a - b);
    const cpu = cpuByKind(kinds, before, after);
    const calls = report.calls;
    const perCall = (v: number): number => (calls === 0 ? Number.NaN : v / calls);
    const cpuMsPerCall = Object.fromEntries(MCP_KINDS.map((k) => [k, perCall(cpu[k])])) as Record<McpKind, number>;
    return {
      callsPerSec: calls / (windowMs / 1000),
      p50: percentile(latencies, 50),
      p95: percentile(latencies, 95),
      p99: percentile(latencies, 99),
      errors: report.errors,
      cpuMsPerCall: { ...cpuMsPerCall, total: perCall(MCP_KINDS.reduce((sum, k) => sum + cpu[k], 0)) },
      redisCmdsPerCall: perCall(cmdsAfter - cmdsBefore),
      peakRssMb: rss,
      // Under a worker, only `node` processes are instances (a launcher's wrapper names the entry too).
      serverProcesses: procs.some((p) => p.kind === 'worker') ? fleetServers : servers,
    };
  } finally {
    await stopAll([agent, ...procs]);
  }
}
