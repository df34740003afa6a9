/**
 * `npm run soak:mcp` (issue #16, "A soak"): 10 agent processes call the
 * tools of a stdio MCP server (server-everything's `echo` and `get-sum`)
 * through a dispatcher and two host workers for a minute (`MCP_SOAK_MS`),
 * while a killer SIGKILLs a worker (and starts a new one) or one of the
 * server's instances (a `node` child of a worker, found in /proc) every few
 * seconds (a worker only while the other serves: with none left, calls are
 * refused with NO_WORKER, which is right but no soak). Then it checks:
 *
 * - every call was answered exactly once, with its own answer (each agent
 *   records its calls' ids and answers), and the dispatcher holds every call
 *   in a final state (GET /v1/calls/:id: none stuck queued or running);
 * - once the fleet is stopped, no server process of this run is left
 *   anywhere on the machine (its command line carries a marker of this run,
 *   so other runs' servers are not counted), no reaper of one's group, and
 *   no zombie of it: a new
 *   process in state Z whose parent is this script, one of its processes, or init.
 *
 * Writes bench/results/soak-mcp-<date>.json (or `MCP_SOAK_OUT`), prints a
 * summary, exits 1 when a check fails. `MCP_SOAK_FROM_SOURCE=1` runs the apps
 * from their TypeScript sources.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { freePort, startLocalRedis } from '@forge-fleet/local-redis';
import { REAPER_NAME } from '@forge-fleet/worker';
import { descendants, ROOT, type Spawned, spawnNode, until } from './proc.js';
import { EVERYTHING_ENTRY } from './mcp/everything.js';
import { mcpFleetSecrets, serverProcessesOf, startDispatcher, startWorker, waitServing, writeServersFile } from './mcp/fleet.js';
import { stopAll } from './mcp/measure.js';
import type { SoakCallRecord } from './mcp/soak-agent.js';

const SOAK_MS = Number(process.env.MCP_SOAK_MS ?? 60_000);
const AGENTS = 10;
const INFLIGHT_PER_AGENT = 4;
const WORKERS = 2;
const INSTANCES = 2;
/** Between the killer's blows: long enough for a restarted worker to start its servers and take calls again. */
const KILL_EVERY_MS = { min: 2000, max: 4000 };
const FROM_SOURCE = process.env.MCP_SOAK_FROM_SOURCE === '1';
/** Marks this run's server processes in /proc. */
const MARKER = `--forge-soak-${randomBytes(6).toString('hex')}`;

interface ProcInfo {
  readonly pid: number;
  readonly state: string;
  readonly ppid: number;
  readonly comm: string;
  readonly cmdline: string;
}

/** Every process on the machine, from /proc. */
function processes(): ProcInfo[] {
  const out: ProcInfo[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      // "pid (comm) state ppid …": comm may hold spaces and parentheses.
      const [state = '', ppid = '0'] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      const cmdline = readFileSync(`/proc/${name}/cmdline`, 'utf8').split('\0').join(' ');
      out.push({ pid: Number(name), state, ppid: Number(ppid), comm, cmdline });
    } catch {
      // Gone while read.
    }
  }
  return out;
}

/** This run's server processes, wherever they are now (a killed worker's orphans are reparented). */
const ourServers = (): ProcInfo[] => processes().filter((p) => p.cmdline.includes(EVERYTHING_ENTRY) && p.cmdline.includes(MARKER));

const zombiesBefore = new Set(processes().filter((p) => p.state === 'Z').map((p) => p.pid));
/**
 * The host tier's reapers (a shell named REAPER_NAME, a worker's child, beside
 * each server) started by this run: their command lines do not carry the
 * marker, so they are told apart from other runs' by not being there before.
 */
const reapersBefore = new Set(processes().filter((p) => p.cmdline.includes(REAPER_NAME)).map((p) => p.pid));
const ourReapers = (): ProcInfo[] => processes().filter((p) => p.cmdline.includes(REAPER_NAME) && !reapersBefore.has(p.pid));
const redisServer = await startLocalRedis();
const secrets = await mcpFleetSecrets('soakmcp');
const serversFile = writeServersFile({ instances: INSTANCES, callsPerInstance: 16 }, { marker: MARKER });
// Short locks and leases, as the tests use: a killed worker's calls are noticed in seconds and re-run elsewhere.
// More attempts than the default 3: in a minute of kills every few seconds, one call can be hit more than thrice.
const env = { ...(process.env.LOG_LEVEL === undefined ? {} : { LOG_LEVEL: process.env.LOG_LEVEL }), FORGE_LOCK_DURATION_MS: '2000', FORGE_LEASE_MS: '3000', FORGE_RETRY_ATTEMPTS: '20', FORGE_RETRY_BACKOFF_MS: '50', FORGE_CATALOG_REFRESH_MS: '500' };
const dispatcher = await startDispatcher(redisServer.url, secrets, { fromSource: FROM_SOURCE, env });
const workers: Spawned[] = [];
const everStarted: Spawned[] = [dispatcher.proc];
/** Each worker's /readyz, by pid: the killer strikes a worker only while every other one serves. */
const readyUrls = new Map<number, string>();
const newWorker = async (): Promise<Spawned> => {
  const port = await freePort();
  const w = startWorker(redisServer.url, secrets, { serversFile, concurrency: INSTANCES * 16, fromSource: FROM_SOURCE, env: { ...env, FORGE_METRICS_PORT: String(port), FORGE_METRICS_HOST: '127.0.0.1' } });
  readyUrls.set(w.child.pid!, `http://127.0.0.1:${port}/readyz`);
  everStarted.push(w);
  return w;
};
const serving = async (w: Spawned): Promise<boolean> => {
  try {
    return (await fetch(readyUrls.get(w.child.pid!)!)).ok;
  } catch {
    return false;
  }
};
for (let i = 0; i < WORKERS; i++) workers.push(await newWorker());
const kills = { worker: 0, instance: 0 };
const killLog: { at: number; what: string; pid: number }[] = [];
const reportDir = mkdtempSync(join(tmpdir(), 'forge-soak-mcp-'));
const agents: Spawned[] = [];
let failedToRun: string | undefined;

try {
  await waitServing(dispatcher.url, secrets.agentToken, 'everything.get-sum', workers, INSTANCES, 120_000);
  for (let i = 0; i < AGENTS; i++) {
    const token = await secrets.mint(`soak-agent-${i}`);
    const a = spawnNode(['--conditions=forge-source', '--import', 'tsx', 'bench/src/mcp/soak-agent.ts', dispatcher.url, `a${i}`, String(INFLIGHT_PER_AGENT), String(SOAK_MS), join(reportDir, `a${i}.json`)], { FORGE_TOKEN: token });
    everStarted.push(a);
    agents.push(a);
  }
  const began = Date.now();
  // The killer: a worker (replaced by a new one) or one server instance, in turn, until the agents stop calling.
  let blow = 0;
  while (Date.now() - began < SOAK_MS - KILL_EVERY_MS.max) {
    await new Promise((r) => setTimeout(r, KILL_EVERY_MS.min + Math.random() * (KILL_EVERY_MS.max - KILL_EVERY_MS.min)));
    if (blow++ % 2 === 0) {
      // Killing the last serving worker would only measure NO_WORKER refusals: the fleet can serve while any worker lives.
      await until('every worker serving before the next kill', async () => (await Promise.all(workers.map(serving))).every(Boolean), 60_000);
      const i = Math.floor(Math.random() * workers.length);
      workers[i]!.child.kill('SIGKILL');
      kills.worker++;
      killLog.push({ at: Date.now(), what: 'worker', pid: workers[i]!.child.pid! });
      workers[i] = await newWorker();
    } else {
      const instances = workers.flatMap((w) => serverProcessesOf(w.child.pid!));
      const victim = instances[Math.floor(Math.random() * instances.length)];
      if (victim !== undefined) {
        process.kill(victim, 'SIGKILL');
        kills.instance++;
        killLog.push({ at: Date.now(), what: 'instance', pid: victim });
      }
    }
  }
  await until('the agents to finish and check their calls', () => agents.every((a) => a.child.exitCode !== null), SOAK_MS + 300_000);
} catch (error) {
  failedToRun = error instanceof Error ? error.message : String(error);
} finally {
  await stopAll([...agents, ...workers, dispatcher.proc]);
}

// The fleet is stopped: what it started must be gone. Reaping takes a moment (a server notices its closed stdin), so wait, bounded.
let leftServers = ourServers();
await until('no server process of this run left', () => (leftServers = ourServers()).length === 0, 15_000).catch(() => undefined);
let leftReapers = ourReapers();
await until('no reaper of this run left', () => (leftReapers = ourReapers()).length === 0, 15_000).catch(() => undefined);
const mine = new Set([process.pid, ...descendants(process.pid), 1]);
const newZombiesNow = (): ProcInfo[] => processes().filter((p) => p.state === 'Z' && !zombiesBefore.has(p.pid) && mine.has(p.ppid));
// tsx's esbuild helper of a process run from source (MCP_SOAK_FROM_SOURCE=1, and the agents): orphaned when its
// process is SIGKILLed, and a zombie where PID 1 does not reap (as in some containers). Not the fleet's; shown apart.
const isTooling = (p: ProcInfo): boolean => p.comm === 'esbuild';
// A killed worker's reapers are PID 1's children once they exit: a reaping PID 1 (an init, tini, docker --init)
// collects them, in its own time, so they are waited for, bounded, and the count first seen is reported beside.
let zombies = newZombiesNow();
const zombiesAtStop = zombies.filter((p) => !isTooling(p)).length;
await until('no zombie of this run left', () => (zombies = newZombiesNow()).every(isTooling), 10_000).catch(() => undefined);
const toolingZombies = zombies.filter(isTooling);
const newZombies = zombies.filter((p) => !isTooling(p));
await redisServer.stop();

const records: SoakCallRecord[] = [];
const missingReports: string[] = [];
for (let i = 0; i < AGENTS; i++) {
  try {
    records.push(...(JSON.parse(readFileSync(join(reportDir, `a${i}.json`), 'utf8')) as { records: SoakCallRecord[] }).records);
  } catch {
    missingReports.push(`a${i}: ${agents[i]?.out.slice(-400) ?? 'not started'}`);
  }
}
const count = (f: (r: SoakCallRecord) => boolean): number => records.filter(f).length;
const outcomes: Record<string, number> = {};
for (const r of records) {
  const key = r.outcome === 'ok' ? 'ok' : `${r.outcome}: ${r.detail ?? ''}`;
  outcomes[key] = (outcomes[key] ?? 0) + 1;
}
const statuses: Record<string, number> = {};
for (const r of records) statuses[r.status ?? 'unknown'] = (statuses[r.status ?? 'unknown'] ?? 0) + 1;
const result = {
  date: new Date().toISOString(),
  ms: SOAK_MS,
  agents: AGENTS,
  inflightPerAgent: INFLIGHT_PER_AGENT,
  workers: WORKERS,
  instancesPerWorker: INSTANCES,
  kills,
  workersStarted: everStarted.length - 1 - agents.length,
  calls: records.length,
  ids: new Set(records.map((r) => r.id)).size,
  answeredOnce: count((r) => r.answers === 1),
  ok: count((r) => r.outcome === 'ok'),
  outcomes,
  dispatcherStatuses: statuses,
  stuck: count((r) => r.status !== 'completed' && r.status !== 'failed' && r.status !== 'cancelled'),
  serverProcessesLeft: leftServers.map((p) => ({ pid: p.pid, state: p.state, ppid: p.ppid })),
  reaperProcessesLeft: leftReapers.map((p) => ({ pid: p.pid, state: p.state, ppid: p.ppid, comm: p.comm })),
  zombiesAwaitingInitAtStop: zombiesAtStop,
  zombiesLeft: newZombies.map((p) => ({ pid: p.pid, ppid: p.ppid, comm: p.comm })),
  toolingZombiesLeft: toolingZombies.map((p) => ({ pid: p.pid, ppid: p.ppid, comm: p.comm })),
  fromSource: FROM_SOURCE,
  missingReports,
  failedToRun,
};
// MCP_SOAK_LOGS=<dir>: every process's output, for finding out why a check failed (the fleet logs at LOG_LEVEL, `warn` unless set).
if (process.env.MCP_SOAK_LOGS !== undefined) {
  mkdirSync(process.env.MCP_SOAK_LOGS, { recursive: true });
  everStarted.forEach((p, i) => writeFileSync(join(process.env.MCP_SOAK_LOGS!, `${i}-${p.child.pid}.log`), p.out));
  writeFileSync(join(process.env.MCP_SOAK_LOGS, 'kills.json'), `${JSON.stringify(killLog, null, 2)}\n`);
}
const file = process.env.MCP_SOAK_OUT ?? join(ROOT, 'bench', 'results', `soak-mcp-${result.date.slice(0, 10)}.json`);
mkdirSync(dirname(file), { recursive: true });
writeFileSync(file, `${JSON.stringify(result, null, 2)}\n`);
process.stdout.write(`${JSON.stringify(result, null, 2)}\nwritten: ${file}\n`);
const passed =
  failedToRun === undefined &&
  missingReports.length === 0 &&
  records.length > 0 &&
  result.ids === records.length &&
  result.answeredOnce === records.length &&
  result.ok === records.length &&
  result.stuck === 0 &&
  leftServers.length === 0 &&
  leftReapers.length === 0 &&
  newZombies.length === 0;
process.exitCode = passed ? 0 : 1;
