import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { FleetClient } from '@forge-fleet/client';
import { isFleetError, type ToolResult } from '@forge-fleet/shared';
import { afterAll, describe, expect, it } from 'vitest';
import { type FleetProcess, ROOT, TestFleet } from '../fixtures/fleet.js';
import { McpTestDir } from '../fixtures/mcp/servers-files.js';
import { zombies } from '../fixtures/mcp/processes.js';
import { until } from '../fixtures/wait.js';

/** How long the agents call, in milliseconds: 20 s by default; MCP_SOAK_MS runs it longer (the issue's minute: 60000). */
const SOAK_MS = Number(process.env.MCP_SOAK_MS ?? 20_000);

const AGENTS = 10;

/** Time between two faults: a worker killed (and replaced) or a server instance killed. */
const FAULT_EVERY_MS = 2_500;

/**
 * Instance kills per worker at most: a pool that sees 5 failures within a
 * minute takes it for a crash loop and stops for good (restart-policy.ts),
 * which is right for a broken server and not what this soak is about.
 */
const KILLS_PER_WORKER = 3;

/** Instances of the server per worker. */
const INSTANCES = 2;

interface Answer {
  readonly id: string;
  readonly n: number;
  readonly result: ToolResult;
}

/**
 * The issue's soak, short: ten agents call a stdio MCP server's tool (the
 * Python server, `retryable: true` in the servers file) through the fleet
 * while workers are killed with SIGKILL and replaced, and server instances are
 * killed. Every call is answered exactly once and rightly; afterwards no
 * server process and no zombie is left.
 */
describe('MCP soak: agents calling a stdio server while workers and instances are killed', () => {
  const fleet = new TestFleet();
  let dir: McpTestDir | undefined;
  const clients: FleetClient[] = [];

  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close()));
    await fleet.stopAll();
    dir?.remove();
  });

  it(`answers every call once, and leaves no server process or zombie (${SOAK_MS} ms)`, async () => {
    const zombiesBefore = zombies();
    const mcp = new McpTestDir('mcp-soak');
    dir = mcp;
    const servers = mcp.write({
      soak: mcp.python('soak.runs', {
        instances: { min: INSTANCES, max: INSTANCES },
        callsPerInstance: 8,
        restartBackoff: { initialMs: 50, maxMs: 500 },
        tools: { square: { retryable: true } },
      }),
    });
    const startWorker = () => fleet.worker({ tier: 'host', tools: false, mcp: servers, concurrency: 16 });
    const workers: { proc: FleetProcess; kills: number }[] = (await Promise.all([startWorker(), startWorker()])).map((proc) => ({ proc, kills: 0 }));
    const dispatcher = await fleet.dispatcher({ FORGE_DEV_MODE: '0' });
    const token = await fleet.token({ subject: 'soak-agent', grants: ['soak.*'] });
    for (let a = 0; a < AGENTS; a++) clients.push(new FleetClient({ url: dispatcher.url, token, timeoutMs: 60_000 }));
    /** The live server processes each worker started (their parent is the worker: the launch wrappers exec the server). */
    const instancesOf = (worker: FleetProcess) => mcp.processes().filter((p) => p.ppid === worker.pid && p.state !== 'Z');
    await until('both workers to run their instances', () => workers.every((w) => instancesOf(w.proc).length === INSTANCES));

    const answers: Answer[] = [];
    const failures: string[] = [];
    const deadline = Date.now() + SOAK_MS;
    const agent = async (a: number, client: FleetClient): Promise<void> => {
      for (let i = 0; Date.now() < deadline; i++) {
        const id = `soak-${a}-${i}`;
        const n = a * 1_000_000 + i;
        try {
          answers.push({ id, n, result: await client.call('soak.square', { n, key: id, delay_ms: 10 }, { id }) });
        } catch (error) {
          failures.push(`${id}: ${isFleetError(error) ? `${error.code} ${error.message}` : String(error)}`);
        }
      }
    };

    let workerKills = 0;
    let instanceKills = 0;
    const faults = async (): Promise<void> => {
      for (let round = 0; Date.now() < deadline - FAULT_EVERY_MS; round++) {
        await new Promise((resolve) => setTimeout(resolve, FAULT_EVERY_MS));
        if (round % 2 === 1) {
          // A replacement first, so the lane always has a worker; then the oldest dies without a word.
          const fresh = await startWorker();
          const [oldest] = workers.splice(0, 1, { proc: fresh, kills: 0 });
          await oldest?.proc.stop('SIGKILL');
          workerKills += 1;
          continue;
        }
        const target = workers.filter((w) => w.kills < KILLS_PER_WORKER).sort((x, y) => x.kills - y.kills)[0];
        const instance = target === undefined ? undefined : instancesOf(target.proc)[0];
        if (target === undefined || instance === undefined) continue;
        try {
          process.kill(instance.pid, 'SIGKILL');
          target.kills += 1;
          instanceKills += 1;
        } catch {
          // It ended between the scan and the kill.
        }
      }
    };

    await Promise.all([faults(), ...clients.map((c, a) => agent(a, c))]);
    // What this run did, for people reading a CI log's artifacts (the assertions below are the test).
    mkdirSync(join(ROOT, '.test-results'), { recursive: true });
    writeFileSync(join(ROOT, '.test-results', 'mcp-soak.json'), JSON.stringify({ soakMs: SOAK_MS, agents: AGENTS, answered: answers.length, failed: failures.length, workerKills, instanceKills }, null, 2));

    expect(failures.slice(0, 10)).toEqual([]);
    expect(workerKills).toBeGreaterThanOrEqual(1);
    expect(instanceKills).toBeGreaterThanOrEqual(1);
    expect(answers.length).toBeGreaterThan(AGENTS);
    // Answered once each, and each with its own call's result.
    const ids = new Set(answers.map((a) => a.id));
    expect(ids.size).toBe(answers.length);
    const wrong = answers.filter(({ id, n, result }) => result.isError || result.toolCallId !== id || result.content !== String(n * n) || result.structuredContent?.n !== n);
    expect(wrong.slice(0, 5).map((w) => ({ id: w.id, result: w.result }))).toEqual([]);
    // The fleet's record of each call says the same; every call ran to its end on a server at least once.
    const records = clients[0]!;
    for (let i = 0; i < answers.length; i += 200) {
      const views = await Promise.all(answers.slice(i, i + 200).map((a) => records.get(a.id)));
      for (const [j, view] of views.entries()) expect(view, answers[i + j]!.id).toMatchObject({ status: 'completed', result: answers[i + j]!.result });
    }
    const ended = new Set(
      mcp
        .runs('soak.runs')
        .filter((r) => r.event === 'end')
        .map((r) => r.key),
    );
    expect(answers.filter((a) => !ended.has(a.id)).map((a) => a.id)).toEqual([]);

    await fleet.stopAll();
    await until('no server process of the soak to be left', () => mcp.processes().length === 0, { timeoutMs: 15_000 });
    await until('no zombie to be left', () => [...zombies()].filter((pid) => !zombiesBefore.has(pid)).length === 0, { timeoutMs: 15_000 });
  }, SOAK_MS + 150_000);
});
