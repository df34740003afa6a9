import { randomUUID } from 'node:crypto';
import { renameSync } from 'node:fs';
import { join } from 'node:path';
import { FleetClient } from '@forge-fleet/client';
import { afterEach, describe, expect, it } from 'vitest';
import { PYTHON_SCRIPT } from '../fixtures/mcp/python-server.js';
import { McpTestDir } from '../fixtures/mcp/servers-files.js';
import { sample } from '../fixtures/prometheus.js';
import { type FleetProcess, TestFleet } from '../fixtures/fleet.js';
import { until } from '../fixtures/wait.js';

/**
 * A worker given a larger `--concurrency` than its MCP server can run takes
 * calls that then wait inside it for a free instance. Such a call has not
 * started: the worker's loss must not be the call's. Killed with SIGKILL, the
 * worker's waiting calls go to another worker once their jobs' locks lapse;
 * stopped, it hands them back to the queue at once. Only the call the server
 * was running is lost with it (the tool is not retryable).
 */

/** Long enough for the lock of a killed worker's jobs to lapse (FORGE_LOCK_DURATION_MS below) and the calls to run elsewhere. */
const CALL_TIMEOUT_MS = 25_000;

describe('calls waiting in a worker for an MCP instance', () => {
  let fleet: TestFleet;
  let dir: McpTestDir;
  const clients: FleetClient[] = [];

  afterEach(async () => {
    await Promise.all(clients.map((c) => c.close()));
    clients.length = 0;
    await fleet.stopAll();
    dir.remove();
  });

  /**
   * One worker whose Python server has one instance taking one call at a time, while the worker takes up to 8
   * calls; a running call `a` (a minute long) and two more, `b` and `c`, that the worker has taken and that wait
   * for the instance. Then a second worker of the same servers, which is idle.
   */
  async function twoCallsWaitingBehindOne(): Promise<{ first: FleetProcess; client: FleetClient; ids: Record<'a' | 'b' | 'c', string> }> {
    fleet = new TestFleet();
    dir = new McpTestDir('mcp-waiting-calls');
    const servers = dir.write({ py: dir.python('py.runs', { instances: { min: 1, max: 1 }, callsPerInstance: 1 }) });
    const env = { FORGE_LOCK_DURATION_MS: '3000', FORGE_SHUTDOWN_GRACE_MS: '1000' };
    const first = await fleet.worker({ tier: 'host', tools: false, mcp: servers, concurrency: 8, env });
    const dispatcher = await fleet.dispatcher({ FORGE_DEV_MODE: '0' });
    const client = new FleetClient({ url: dispatcher.url, token: await fleet.token({ subject: 'waiting-calls', grants: ['py.*'] }), timeoutMs: CALL_TIMEOUT_MS });
    clients.push(client);
    await until('the py tools to be served', async () => (await client.tools()).some((t) => t.name === 'py.wait'), { timeoutMs: 20_000 });

    const ids = { a: randomUUID(), b: randomUUID(), c: randomUUID() };
    await client.submit('py.wait', { ms: 60_000, key: 'a' }, { id: ids.a });
    await until('call a to run on the server', () => dir.runs('py.runs').some((r) => r.key === 'a' && r.event === 'start'));
    await client.submit('py.wait', { ms: 50, key: 'b' }, { id: ids.b });
    await client.submit('py.wait', { ms: 50, key: 'c' }, { id: ids.c });
    // All three jobs are the first worker's: none is left waiting in the queue for another worker to take.
    await until('the first worker to hold all three calls', async () => {
      const metrics = await (await fetch(`${dispatcher.url}/metrics`)).text();
      return sample(metrics, 'forge_queue_jobs', { tier: 'host', state: 'active' }) === 3 && sample(metrics, 'forge_queue_jobs', { tier: 'host', state: 'waiting' }) === 0;
    });
    expect(dir.runs('py.runs').filter((r) => r.event === 'start').map((r) => r.key)).toEqual(['a']);
    await fleet.worker({ tier: 'host', tools: false, mcp: servers, concurrency: 8, env });
    return { first, client, ids };
  }

  /** `b` and `c` ran once each, elsewhere, and completed; `a`, which the server was running, is lost with its worker (its tool is not retryable). */
  async function expectOnlyTheRunningCallLost(client: FleetClient, ids: Record<'a' | 'b' | 'c', string>): Promise<void> {
    const [a, b, c] = await Promise.all([client.wait(ids.a), client.wait(ids.b), client.wait(ids.c)]);
    expect(b, JSON.stringify(b)).toMatchObject({ isError: false, content: 'waited 50 ms' });
    expect(c, JSON.stringify(c)).toMatchObject({ isError: false, content: 'waited 50 ms' });
    expect(a.error?.code, JSON.stringify(a)).toBe('WORKER_LOST');
    const starts = dir.runs('py.runs').filter((r) => r.event === 'start');
    expect(starts.map((r) => r.key).sort()).toEqual(['a', 'b', 'c']);
  }

  it('runs them on another worker when the worker holding them is killed with SIGKILL', async () => {
    const { first, client, ids } = await twoCallsWaitingBehindOne();
    await first.stop('SIGKILL');
    await expectOnlyTheRunningCallLost(client, ids);
  }, 60_000);

  it('hands them back to the queue when the worker holding them stops, and another worker runs them', async () => {
    const { first, client, ids } = await twoCallsWaitingBehindOne();
    const code = await first.stop('SIGTERM');
    expect(code, first.output().slice(-3000)).toBe(0);
    // The running call had the shutdown's grace period (1 s here) to end, and did not.
    await expectOnlyTheRunningCallLost(client, ids);
  }, 60_000);

  it('moves a call waiting on the only, full, worker to a worker that joins with a free slot', async () => {
    fleet = new TestFleet();
    dir = new McpTestDir('mcp-waiting-join');
    const servers = dir.write({ py: dir.python('py.runs', { instances: { min: 1, max: 1 }, callsPerInstance: 1 }) });
    const env = { FORGE_LEASE_MS: '3000', FORGE_LOCK_DURATION_MS: '3000' };
    await fleet.worker({ tier: 'host', tools: false, mcp: servers, concurrency: 8, env });
    const dispatcher = await fleet.dispatcher({ FORGE_DEV_MODE: '0' });
    const client = new FleetClient({ url: dispatcher.url, token: await fleet.token({ subject: 'waiting-join', grants: ['py.*'] }), timeoutMs: CALL_TIMEOUT_MS });
    clients.push(client);
    await until('the py tools to be served', async () => (await client.tools()).some((t) => t.name === 'py.wait'), { timeoutMs: 20_000 });
    // A call that holds the only slot for longer than the test, and one that waits for it in the worker.
    const long = randomUUID();
    await client.submit('py.wait', { ms: 60_000, key: 'long' }, { id: long });
    await until('the long call to run', () => dir.runs('py.runs').some((r) => r.key === 'long' && r.event === 'start'));
    const waiting = client.call('py.wait', { ms: 10, key: 'waiting' });
    await until('the second call to wait in the worker', async () => sample(await (await fetch(`${dispatcher.url}/metrics`)).text(), 'forge_queue_jobs', { tier: 'host', state: 'active' }) === 2);
    await fleet.worker({ tier: 'host', tools: false, mcp: servers, concurrency: 8, env });
    expect(await waiting).toMatchObject({ isError: false, content: 'waited 10 ms' });
    const pids = (key: string) => dir.runs('py.runs').filter((r) => r.key === key && r.event === 'start').map((r) => r.pid);
    expect(pids('waiting')).toHaveLength(1);
    expect(pids('waiting')[0]).not.toBe(pids('long')[0]);
    await client.cancel(long);
  }, 60_000);

  /** A fleet of `workers` host workers of a one-slot Python server, a dispatcher, and a token for it; resolves once all serve. */
  async function oneSlotWorkers(name: string, workers: readonly ('default' | number)[]): Promise<{ url: string; token: string; procs: FleetProcess[]; servers: string }> {
    fleet = new TestFleet();
    dir = new McpTestDir(name);
    const servers = dir.write({ py: dir.python('py.runs', { instances: { min: 1, max: 1 }, callsPerInstance: 1 }) });
    const env = { FORGE_LOCK_DURATION_MS: '3000', FORGE_SHUTDOWN_GRACE_MS: '1000' };
    const procs = await Promise.all(workers.map((concurrency) => fleet.worker({ tier: 'host', tools: false, mcp: servers, concurrency, env })));
    const dispatcher = await fleet.dispatcher({ FORGE_DEV_MODE: '0' });
    const token = await fleet.token({ subject: name, grants: ['py.*'] });
    await until(`the py tools to be served by ${workers.length} workers`, async () => {
      const metrics = await (await fetch(`${dispatcher.url}/metrics`)).text();
      return sample(metrics, 'forge_workers', { tier: 'host' }) === workers.length;
    }, { timeoutMs: 20_000 });
    return { url: dispatcher.url, token, procs, servers };
  }

  /** One request, one job: a dispatcher sends calls admitted together for one pack as one job, to one worker. */
  async function batchOf(url: string, token: string, calls: readonly { key: string; ms: number }[]): Promise<string[]> {
    const res = await fetch(`${url}/v1/calls/batch?wait=${CALL_TIMEOUT_MS}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ calls: calls.map(({ key, ms }) => ({ id: `${key}-${randomUUID()}`, name: 'py.wait', arguments: { ms, key } })) }),
    });
    return (await res.text()).split('\n').filter((line) => line.trim() !== '').map((line) => (JSON.parse(line) as { status: string }).status);
  }

  const serverPids = (): Set<number> => new Set(dir.runs('py.runs').filter((r) => r.event === 'start').map((r) => r.pid));

  // Its calls past the free slots, the server's (a worker given more calls than its server runs) or the worker's own.
  for (const concurrency of [8, 'default'] as const) {
    it(`hands back the calls of a batch past the slots free on the worker that took it, so an idle worker runs them (--concurrency ${concurrency})`, async () => {
      const { url, token } = await oneSlotWorkers('mcp-batch-split', [concurrency, concurrency]);
      const statuses = await batchOf(url, token, ['b1', 'b2', 'b3', 'b4'].map((key) => ({ key, ms: 1000 })));
      expect(statuses).toEqual(['completed', 'completed', 'completed', 'completed']);
      // Both workers' instances ran some: the one that took the job kept what its one slot could run and handed back the rest.
      expect(serverPids().size).toBe(2);
      expect(dir.runs('py.runs').filter((r) => r.event === 'start')).toHaveLength(4);
    }, 60_000);
  }

  it("hands the batch's calls waiting for a call slot back to the queue when the worker stops, and another worker runs them", async () => {
    const { url, token, procs, servers } = await oneSlotWorkers('mcp-batch-stop', ['default']);
    const [first] = procs;
    // The only worker keeps the whole batch: one call runs, two wait for its one call slot.
    const ended = batchOf(url, token, [{ key: 'a', ms: 60_000 }, { key: 'b', ms: 50 }, { key: 'c', ms: 50 }]);
    await until('call a to run on the server', () => dir.runs('py.runs').some((r) => r.key === 'a' && r.event === 'start'));
    const firstPid = dir.runs('py.runs').find((r) => r.key === 'a')!.pid;
    await fleet.worker({ tier: 'host', tools: false, mcp: servers, concurrency: 'default', env: { FORGE_LOCK_DURATION_MS: '3000' } });
    expect(await first!.stop('SIGTERM')).toBe(0);
    const statuses = await ended;
    expect(statuses.sort()).toEqual(['completed', 'completed', 'failed']);
    // b and c ran on the other worker's instance, never on the stopping one's.
    const ranOn = dir.runs('py.runs').filter((r) => r.event === 'start' && r.key !== 'a').map((r) => r.pid);
    expect(ranOn).toHaveLength(2);
    expect(ranOn.every((pid) => pid !== firstPid)).toBe(true);
  }, 60_000);

  it('ends NO_WORKER, not started, a call waiting for a server that then fails to come back', async () => {
    fleet = new TestFleet();
    dir = new McpTestDir('mcp-server-gone');
    const servers = dir.write({ py: dir.python('py.runs', { instances: { min: 1, max: 1 }, callsPerInstance: 1, restartBackoff: { initialMs: 100, maxMs: 200 }, crashLoop: { failures: 2, windowMs: 60_000 } }) });
    await fleet.worker({ tier: 'host', tools: false, mcp: servers, concurrency: 8 });
    const dispatcher = await fleet.dispatcher({ FORGE_DEV_MODE: '0' });
    const client = new FleetClient({ url: dispatcher.url, token: await fleet.token({ subject: 'server-gone', grants: ['py.*'] }), timeoutMs: CALL_TIMEOUT_MS });
    clients.push(client);
    await until('the py tools to be served', async () => (await client.tools()).some((t) => t.name === 'py.wait'), { timeoutMs: 20_000 });
    const running = randomUUID();
    await client.submit('py.wait', { ms: 60_000, key: 'running' }, { id: running });
    await until('the call to run on the server', () => dir.runs('py.runs').some((r) => r.key === 'running' && r.event === 'start'));
    const waiting = randomUUID();
    await client.submit('py.wait', { ms: 50, key: 'waiting' }, { id: waiting });
    // The server's script goes away and its process dies: it cannot come back, and the pool crash-loops.
    renameSync(join(dir.pythonDir, PYTHON_SCRIPT), join(dir.pythonDir, `${PYTHON_SCRIPT}.gone`));
    const pid = dir.runs('py.runs').find((r) => r.key === 'running')!.pid;
    process.kill(pid, 'SIGKILL');
    const lost = await client.wait(running);
    expect(lost.error?.code, JSON.stringify(lost)).toBe('MCP_SERVER_LOST');
    // It never reached the server: FleetClient throws it, as any call whose tool never ran.
    const gone = await client.wait(waiting).then((r) => JSON.stringify(r), (e: unknown) => e);
    expect(gone, String(gone)).toMatchObject({ code: 'NO_WORKER', message: expect.stringContaining('send the call again with a new id') as string });
    expect(dir.runs('py.runs').some((r) => r.key === 'waiting')).toBe(false);
    // With its server's tools withdrawn, the same id again answers for the call it names, never "no worker: call again".
    await until('py.wait to be withdrawn', async () => !(await client.tools()).some((t) => t.name === 'py.wait'), { timeoutMs: 20_000 });
    const again = await client.call('py.wait', { ms: 60_000, key: 'running' }, { id: running });
    expect(again.error?.code, JSON.stringify(again)).toBe('MCP_SERVER_LOST');
    expect(dir.runs('py.runs').filter((r) => r.key === 'running' && r.event === 'start')).toHaveLength(1);
    // The id names a call: another call under it, or another caller's, is refused as always, not told "no worker".
    await expect(client.call('py.wait', { ms: 1, key: 'running' }, { id: running })).rejects.toMatchObject({ code: 'IDEMPOTENCY_CONFLICT' });
    const stranger = new FleetClient({ url: dispatcher.url, token: await fleet.token({ subject: 'someone-else', grants: ['py.*'] }), timeoutMs: CALL_TIMEOUT_MS });
    clients.push(stranger);
    await expect(stranger.call('py.wait', { ms: 60_000, key: 'running' }, { id: running })).rejects.toMatchObject({ code: 'BAD_REQUEST' });
  }, 60_000);
});
