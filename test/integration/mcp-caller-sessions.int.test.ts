import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { FleetClient } from '@forge-fleet/client';
import type { ToolResult } from '@forge-fleet/shared';
import { afterEach, describe, expect, it } from 'vitest';
import { allProcesses } from '../fixtures/mcp/processes.js';
import { McpTestDir } from '../fixtures/mcp/servers-files.js';
import { sample } from '../fixtures/prometheus.js';
import { type FleetProcess, TestFleet } from '../fixtures/fleet.js';
import { until } from '../fixtures/wait.js';

/**
 * A `perCaller` server served by several workers: each caller's calls reach
 * the one instance holding its session, whichever worker takes them from the
 * queue (the others send them on), so what the server keeps for a caller is
 * there at every call. A worker that goes away takes its callers' sessions
 * with it, and their next calls are answered by the workers left, in new
 * sessions.
 */

/** Long enough for a dead worker's leases (FORGE_LEASE_MS below) to lapse and its callers' calls to be re-homed. */
const CALL_TIMEOUT_MS = 25_000;

const entities = (result: ToolResult): string[] => ((result.structuredContent?.entities ?? []) as { name: string }[]).map((e) => e.name).sort();
/** `pid` and its ancestors, read from /proc. */
function lineOf(pid: number): number[] {
  const parent = new Map(allProcesses().map((p) => [p.pid, p.ppid]));
  const line: number[] = [];
  for (let at: number | undefined = pid; at !== undefined && at > 1 && !line.includes(at); at = parent.get(at)) line.push(at);
  return line;
}

const note = (name: string) => ({ entities: [{ name, entityType: 'note', observations: [`written by ${name}`] }] });

describe('a perCaller server on several workers', () => {
  let fleet: TestFleet;
  let dir: McpTestDir;
  const clients: FleetClient[] = [];

  afterEach(async () => {
    await Promise.all(clients.map((c) => c.close()));
    clients.length = 0;
    await fleet.stopAll();
    dir.remove();
  });

  /** `workers` host workers of server-memory (a session per caller), a dispatcher, and a client per caller; resolves once all serve. */
  async function memoryOn(workers: number, callers: readonly string[], max = 8): Promise<{ procs: FleetProcess[]; client: Map<string, FleetClient>; metrics: () => Promise<string>; servers: string; env: Record<string, string> }> {
    fleet = new TestFleet();
    dir = new McpTestDir('mcp-caller-sessions');
    // Sessions outlive the tests (idleMs): a caller beyond `max` on a worker could only wait for another's to end.
    const servers = dir.write({ memory: dir.memory({ session: 'perCaller', instances: { min: 0, max }, idleMs: 300_000 }) });
    const env = { FORGE_LEASE_MS: '3000', FORGE_LOCK_DURATION_MS: '3000', FORGE_SHUTDOWN_GRACE_MS: '1000' };
    const procs = await Promise.all(Array.from({ length: workers }, () => fleet.worker({ tier: 'host', tools: false, mcp: servers, env })));
    const dispatcher = await fleet.dispatcher({ FORGE_DEV_MODE: '0', FORGE_LEASE_MS: '3000' });
    const metrics = async () => (await fetch(`${dispatcher.url}/metrics`)).text();
    await until(`server-memory to be served by ${workers} workers`, async () => sample(await metrics(), 'forge_workers', { tier: 'host' }) === workers, { timeoutMs: 20_000 });
    const client = new Map<string, FleetClient>();
    for (const caller of callers) {
      const c = new FleetClient({ url: dispatcher.url, token: await fleet.token({ subject: caller, grants: ['memory.*'] }), timeoutMs: CALL_TIMEOUT_MS });
      clients.push(c);
      client.set(caller, c);
    }
    return { procs, client, metrics, servers, env };
  }

  it("keeps each caller's calls on its one instance, whichever worker takes them", async () => {
    const callers = ['alice', 'bob', 'carol', 'dave'];
    const { client } = await memoryOn(2, callers);
    // Each caller writes notes and reads its graph, many times, all callers at once: with two workers taking calls
    // from one queue, about half of each caller's calls are taken by the worker not holding its session.
    await Promise.all(
      callers.map(async (caller) => {
        const c = client.get(caller)!;
        const written: string[] = [];
        for (let i = 0; i < 8; i++) {
          const name = `${caller}-${i}`;
          expect(await c.call('memory.create_entities', note(name))).toMatchObject({ isError: false });
          written.push(name);
          expect(entities(await c.call('memory.read_graph')), `${caller}'s graph after ${i + 1} notes`).toEqual([...written].sort());
        }
      }),
    );
    // Concurrent calls of one caller too: each sees the notes written before it was sent.
    const alice = client.get('alice')!;
    const graphs = await Promise.all(Array.from({ length: 12 }, () => alice.call('memory.read_graph')));
    for (const graph of graphs) expect(entities(graph)).toHaveLength(8);
    // One instance per caller, in all: no caller's notes were ever written by a second instance (each writes its own
    // file, memory-<pid>.jsonl; a worker also has an instance it started to read the tools, which holds no notes).
    const files = readdirSync(dir.path('memory')).map((name) => readFileSync(join(dir.path('memory'), name), 'utf8'));
    for (const caller of callers) expect(files.filter((text) => text.includes(`"${caller}-`)), `${caller}'s files`).toHaveLength(1);
  }, 90_000);

  it('gives a new caller a session on a worker with room, when the worker that took its call has none', async () => {
    // One instance a worker: alice's fills the worker that takes her first call; bob's first call, whichever worker
    // takes it, must end on the other one, or wait for alice's session to end (idleMs: longer than the call timeout).
    const { procs, client } = await memoryOn(2, ['alice', 'bob'], 1);
    const [alice, bob] = [client.get('alice')!, client.get('bob')!];
    expect(await alice.call('memory.create_entities', note('alice-note'))).toMatchObject({ isError: false });
    for (let i = 0; i < 4; i++) {
      const [a, b] = await Promise.all([alice.call('memory.read_graph'), i === 0 ? bob.call('memory.create_entities', note('bob-note')) : bob.call('memory.read_graph')]);
      expect(entities(a)).toEqual(['alice-note']);
      expect(b, JSON.stringify(b)).toMatchObject({ isError: false });
    }
    expect(entities(await bob.call('memory.read_graph'))).toEqual(['bob-note']);
    const instances = dir.processes().filter((p) => p.cmdline.includes('server-memory'));
    expect(instances).toHaveLength(2);
    const holders = instances.map((instance) => procs.findIndex((p) => lineOf(instance.pid).includes(p.pid)));
    expect(holders.sort()).toEqual([0, 1]);
  }, 90_000);

  it("never splits a caller's session when its first calls come at once, to workers near max", async () => {
    // Three workers of two instances each and five new callers, each sending its calls six at a time: the workers
    // race to claim each caller, and fill up while they do (each hands a sixth caller's calls on to one with room).
    fleet = new TestFleet();
    dir = new McpTestDir('mcp-caller-sessions-race');
    const servers = dir.write({ py: dir.python('py.runs', { session: 'perCaller', instances: { min: 0, max: 2 }, idleMs: 300_000 }) });
    const env = { FORGE_LEASE_MS: '3000', FORGE_LOCK_DURATION_MS: '3000' };
    await Promise.all([1, 2, 3].map(() => fleet.worker({ tier: 'host', tools: false, mcp: servers, env })));
    const dispatcher = await fleet.dispatcher({ FORGE_DEV_MODE: '0', FORGE_LEASE_MS: '3000' });
    await until('py to be served by 3 workers', async () => sample(await (await fetch(`${dispatcher.url}/metrics`)).text(), 'forge_workers', { tier: 'host' }) === 3, { timeoutMs: 20_000 });
    const callers = ['c0', 'c1', 'c2', 'c3', 'c4'];
    const clientOf = new Map<string, FleetClient>();
    for (const caller of callers) {
      const c = new FleetClient({ url: dispatcher.url, token: await fleet.token({ subject: caller, grants: ['py.*'] }), timeoutMs: CALL_TIMEOUT_MS });
      clients.push(c);
      clientOf.set(caller, c);
    }
    await Promise.all(
      callers.map(async (caller) => {
        const c = clientOf.get(caller)!;
        for (let wave = 0; wave < 3; wave++) {
          const results = await Promise.all(Array.from({ length: 6 }, (_, i) => c.call('py.wait', { ms: 30, key: `${caller}/${wave}/${i}` })));
          for (const r of results) expect(r, JSON.stringify(r)).toMatchObject({ isError: false });
        }
        for (let i = 0; i < 5; i++) expect(await c.call('py.wait', { ms: 1, key: `${caller}/after/${i}` })).toMatchObject({ isError: false });
      }),
    );
    const starts = dir.runs('py.runs').filter((r) => r.event === 'start');
    for (const caller of callers) {
      const pids = new Set(starts.filter((r) => r.key?.startsWith(`${caller}/`) === true).map((r) => r.pid));
      expect(pids.size, `${caller}'s calls ran in ${[...pids].join(', ')}`).toBe(1);
    }
  }, 90_000);

  it('moves a new caller waiting on a full worker to a worker that joins with room', async () => {
    // One worker, one instance, held by alice (idleMs: longer than the call timeout): bob's call can only wait there.
    const { procs, client, metrics, servers, env } = await memoryOn(1, ['alice', 'bob'], 1);
    const [alice, bob] = [client.get('alice')!, client.get('bob')!];
    expect(await alice.call('memory.create_entities', note('alice-note'))).toMatchObject({ isError: false });
    const waiting = bob.call('memory.create_entities', note('bob-note'));
    // Held by the worker (taken, waiting for an instance), not in the queue.
    await until("bob's call to wait in the worker", async () => sample(await metrics(), 'forge_queue_jobs', { tier: 'host', state: 'active' }) === 1);
    const joined = await fleet.worker({ tier: 'host', tools: false, mcp: servers, env });
    expect(await waiting, 'bob, served by the worker that joined').toMatchObject({ isError: false });
    expect(entities(await bob.call('memory.read_graph'))).toEqual(['bob-note']);
    expect(entities(await alice.call('memory.read_graph'))).toEqual(['alice-note']);
    const bobs = dir.processes().filter((p) => p.cmdline.includes('server-memory') && lineOf(p.pid).includes(joined.pid));
    expect(bobs, 'an instance of the worker that joined').toHaveLength(1);
    expect(procs).toHaveLength(1);
  }, 90_000);

  it("answers a caller whose worker was killed with SIGKILL, in a new session on the worker left", async () => {
    const { procs, client } = await memoryOn(2, ['alice']);
    const alice = client.get('alice')!;
    expect(await alice.call('memory.create_entities', note('before'))).toMatchObject({ isError: false });
    // Find the worker holding alice's session: the parent of the instance whose file (memory-<pid>.jsonl) holds her
    // note. (Each worker also has an instance it started to read the server's tools.)
    const file = readdirSync(dir.path('memory')).find((name) => readFileSync(join(dir.path('memory'), name), 'utf8').includes('before'));
    const instance = Number(/^memory-(\d+)\.jsonl$/.exec(file ?? '')?.[1]);
    const holder = procs.find((p) => lineOf(instance).includes(p.pid));
    expect(holder, 'the worker holding the session').toBeDefined();
    await holder!.stop('SIGKILL');
    // Every call is answered, by the other worker, in a new session: what the dead one held is gone.
    const after = await Promise.all(Array.from({ length: 6 }, () => alice.call('memory.read_graph')));
    for (const graph of after) expect(graph, JSON.stringify(graph)).toMatchObject({ isError: false });
    expect(await alice.call('memory.create_entities', note('after'))).toMatchObject({ isError: false });
    for (let i = 0; i < 4; i++) expect(entities(await alice.call('memory.read_graph'))).toEqual(['after']);
  }, 90_000);

  it("hands a stopping worker's callers to the workers left, at once", async () => {
    const { procs, client } = await memoryOn(2, ['alice', 'bob']);
    for (const caller of ['alice', 'bob']) expect(await client.get(caller)!.call('memory.create_entities', note(caller))).toMatchObject({ isError: false });
    const [first] = procs;
    expect(await first!.stop('SIGTERM'), first!.output().slice(-3000)).toBe(0);
    for (const caller of ['alice', 'bob']) {
      for (let i = 0; i < 4; i++) expect(await client.get(caller)!.call('memory.read_graph'), caller).toMatchObject({ isError: false });
    }
    // Their sessions went with the stopped worker, or are on the worker left: each caller now has one instance.
    expect(dir.processes().filter((p) => p.cmdline.includes('server-memory'))).toHaveLength(2);
  }, 90_000);
});
