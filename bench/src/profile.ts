/**
 * `npm run bench:profile`: where the fleet's time goes. Runs a dispatcher and
 * a worker under `--cpu-prof` with one agent at 256 calls in flight, then
 * prints each process's top self-time functions and packages. The
 * .cpuprofile files stay in bench/results/profiles/ for a flame graph
 * (open them in Chrome DevTools or speedscope).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort, startLocalRedis } from '@forge-fleet/local-redis';
import { mcpFleetSecrets, SERVER_NAME, writeServersFile } from './mcp/fleet.js';
import { nodeArgsFor, fleetSecrets } from './proc.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const OUT = join(ROOT, 'bench', 'results', 'profiles');
const INFLIGHT = Number(process.env.BENCH_INFLIGHT ?? 256);
/** The entrance to profile: the agent of a bench arm (fleet-agent.ts: call streams; http-agent.ts: a request per call; fleet-mcp-agent.ts: /mcp). */
const AGENT = process.env.BENCH_AGENT ?? 'bench/src/fleet-agent.ts';
/**
 * `BENCH_PROFILE=mcp`: the #16 fleet arm instead — a host worker serving server-everything (2 instances, as
 * the mcp-fleet arm) and FleetClient calling `everything.echo`; the instances' own CPU is not profiled.
 */
const MCP = process.env.BENCH_PROFILE === 'mcp';
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

function run(args: readonly string[], env: Record<string, string>): ChildProcess {
  return spawn(process.execPath, args, { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'inherit'] });
}

function exited(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => (child.exitCode !== null ? resolve() : child.once('exit', () => resolve())));
}

function where(url: string): string {
  const m = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (m) return m[1]!;
  if (url.startsWith('node:') || url === '') return url === '' ? '(native/gc)' : 'node-internal';
  const rel = url.replace(`file://${ROOT}/`, '');
  return rel.split('/').slice(0, 2).join('/');
}

function summarise(file: string): string {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const self = new Map<number, number>();
  profile.samples.forEach((id, i) => self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)));
  let total = 0;
  const fns = new Map<string, number>();
  const pkgs = new Map<string, number>();
  for (const [id, us] of self) {
    const node = byId.get(id)!;
    const { functionName, url, lineNumber } = node.callFrame;
    if (functionName === '(idle)' || functionName === '(program)') continue;
    total += us;
    const key = `${functionName || '(anonymous)'} ${url.replace(`file://${ROOT}/`, '')}:${lineNumber + 1}`;
    fns.set(key, (fns.get(key) ?? 0) + us);
    const pkg = where(url);
    pkgs.set(pkg, (pkgs.get(pkg) ?? 0) + us);
  }
  const top = (m: Map<string, number>, n: number) =>
    [...m.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, n)
      .map(([k, us]) => `  ${((100 * us) / total).toFixed(1).padStart(5)}%  ${k}`)
      .join('\n');
  return `busy ${(total / 1000).toFixed(0)} ms\nby package:\n${top(pkgs, 12)}\nby function:\n${top(fns, 25)}`;
}

rmSync(OUT, { recursive: true, force: true });
mkdirSync(OUT, { recursive: true });
const redis = await startLocalRedis();
const env = { REDIS_URL: redis.url, FORGE_PREFIX: 'prof', LOG_LEVEL: 'warn' };
const fleet = await fleetSecrets(env.FORGE_PREFIX);
const mcp = MCP ? await mcpFleetSecrets(env.FORGE_PREFIX) : undefined;
const signing =
  mcp === undefined
    ? { dispatcher: fleet.dispatcher, worker: fleet.platformWorker, agent: fleet.agent, tool: 'noop', workerArgs: ['--tier', 'platform', '--tools', 'bench/src/tools.ts'], agentArgs: (u: string) => [AGENT, u, String(INFLIGHT)] }
    : {
        dispatcher: mcp.dispatcher,
        worker: mcp.hostWorker,
        agent: { FORGE_TOKEN: mcp.agentToken },
        tool: `${SERVER_NAME}.echo`,
        workerArgs: ['--tier', 'host', '--mcp', writeServersFile({ instances: 2, callsPerInstance: 128 })],
        agentArgs: (u: string) => ['bench/src/mcp/mcp-agent.ts', 'fleet', u, String(INFLIGHT), 'echo'],
      };
const port = await freePort();
const url = `http://127.0.0.1:${port}`;
const dispatcher = run(['--cpu-prof', `--cpu-prof-dir=${join(OUT, 'dispatcher')}`, ...nodeArgsFor('apps/dispatcher/bin/forge-dispatcher.js')], { ...env, ...signing.dispatcher, PORT: String(port) });
const worker = run(['--cpu-prof', `--cpu-prof-dir=${join(OUT, 'worker')}`, ...nodeArgsFor('apps/worker/bin/forge-worker.js'), ...signing.workerArgs, '--concurrency', '256'], { ...env, ...signing.worker });
try {
  for (;;) {
    try {
      const body = (await (await fetch(`${url}/v1/tools`, { headers: { authorization: `Bearer ${signing.agent.FORGE_TOKEN}` } })).json()) as { tools: { name: string }[] };
      if (body.tools.some((t) => t.name === signing.tool)) break;
    } catch {
      // not up yet
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  const agent = spawn(process.execPath, ['--conditions=forge-source', '--import', 'tsx', ...signing.agentArgs(url)], { cwd: ROOT, env: { ...process.env, ...signing.agent }, stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  agent.stdout.on('data', (d: Buffer) => (out += d.toString()));
  while (!out.includes('"event":"ready"')) await new Promise((r) => setTimeout(r, 20));
  agent.kill('SIGUSR1');
  await new Promise((r) => setTimeout(r, SECONDS * 1000));
  agent.kill('SIGUSR2');
  await exited(agent);
  const report = JSON.parse(out.split('\n').find((l) => l.includes('"event":"report"'))!) as { calls: number; windowMs: number };
  process.stdout.write(`${report.calls} calls in ${(report.windowMs / 1000).toFixed(1)} s = ${Math.round(report.calls / (report.windowMs / 1000))} calls/s at ${INFLIGHT} in flight\n`);
} finally {
  dispatcher.kill('SIGTERM');
  worker.kill('SIGTERM');
  await Promise.all([exited(dispatcher), exited(worker)]);
  await redis.stop();
}
for (const name of ['dispatcher', 'worker']) {
  for (const file of readdirSync(join(OUT, name)).filter((f) => f.endsWith('.cpuprofile'))) {
    process.stdout.write(`\n== ${name} (${file})\n${summarise(join(OUT, name, file))}\n`);
  }
}
