import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FleetClient } from '@forge-fleet/client';
import { freePort } from '@forge-fleet/local-redis';
import { isFleetError, type ToolResult } from '@forge-fleet/shared';
import { CallStore, fleetKeys } from '@forge-fleet/store';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ROOT, TestFleet } from '../fixtures/fleet.js';
import { redisUrl } from '../fixtures/redis.js';
import { until } from '../fixtures/wait.js';

/**
 * Faults with real processes, under load: a worker killed with SIGKILL, the
 * fleet's Redis killed and restarted (AOF, `appendfsync always`), a dispatcher
 * killed while agents wait on it. In every case each call the fleet accepted
 * gets exactly one final answer, and no non-retryable call runs twice. The
 * figures of each run (calls, outcomes, time to recover) are written to
 * `.test-results/reliability.json` for docs/reliability.md.
 */

const figures: Record<string, unknown> = {};
afterAll(() => {
  mkdirSync(join(ROOT, '.test-results'), { recursive: true });
  writeFileSync(join(ROOT, '.test-results', 'reliability.json'), `${JSON.stringify(figures, null, 2)}\n`);
});

/** How each call of a run ended, by outcome (`completed`, or the error code). */
function tally(outcomes: readonly (ToolResult | Error)[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const outcome of outcomes) {
    const key = outcome instanceof Error ? (isFleetError(outcome) ? `rejected:${outcome.code}` : `error:${outcome.message}`) : outcome.isError ? (outcome.error?.code ?? 'failed') : 'completed';
    counts[key] = (counts[key] ?? 0) + 1;
  }
  return counts;
}

const settle = <T,>(promise: Promise<T>): Promise<T | Error> => promise.catch((error: unknown) => (error instanceof Error ? error : new Error(String(error))));

/** A redis-server with AOF fsynced on every write, killable and restartable on the same port and directory. */
class DurableRedis {
  readonly dir = mkdtempSync(join(tmpdir(), 'forge-aof-'));
  #child: ChildProcess | undefined;
  constructor(readonly port: number) {}

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  async start(): Promise<void> {
    const args = ['--port', String(this.port), '--bind', '127.0.0.1', '--dir', this.dir, '--save', '', '--appendonly', 'yes', '--appendfsync', 'always'];
    this.#child = spawn('redis-server', args, { stdio: 'ignore' });
    const probe = new Redis(this.url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    // Refusals while it starts are expected; each attempt's outcome is read below.
    probe.on('error', () => undefined);
    try {
      await until(`redis-server on ${this.port} to come up`, async () => {
        try {
          if (probe.status !== 'ready') await probe.connect();
          // Loading the AOF answers LOADING until it is done.
          return (await probe.ping()) === 'PONG';
        } catch (error) {
          probe.disconnect();
          throw error;
        }
      });
    } finally {
      probe.disconnect();
    }
  }

  /** SIGKILL: nothing is flushed at exit; what survives is what `appendfsync always` wrote before each reply. */
  async kill(): Promise<void> {
    const child = this.#child;
    if (child === undefined || child.exitCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
  }

  async stop(): Promise<void> {
    await this.kill();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

describe('faults survived under load', () => {
  let fleet: TestFleet;
  let counters: Redis;
  let clients: FleetClient[] = [];
  const runs = async (ids: readonly string[]): Promise<number[]> => (await counters.mget(ids.map((id) => `${fleet.prefix}:test:runs:{${id}}`))).map((v) => Number(v ?? 0));
  /** How many of `calls` have run at least once (the load is on). */
  const callsStarted = async (calls: readonly { id: string }[]): Promise<number> => (await runs(calls.map((c) => c.id))).filter((n) => n > 0).length;

  beforeEach(() => {
    fleet = new TestFleet();
    counters = new Redis(redisUrl());
    clients = [];
  });

  afterEach(async () => {
    await Promise.all(clients.map((c) => c.close()));
    counters.disconnect();
    await fleet.stopAll();
  });

  it('kill -9 of a worker mid-load: every call ends once — retryable ones re-run elsewhere, the others WORKER_LOST, none run twice', async () => {
    const [doomed] = await Promise.all([fleet.worker({ tier: 'platform', concurrency: 32 }), fleet.worker({ tier: 'platform', concurrency: 32 })]);
    const { url } = await fleet.dispatcher();
    const client = new FleetClient({ url });
    clients.push(client);
    const calls = Array.from({ length: 400 }, (_, i) => ({ id: `kill9-${i}-${randomUUID()}`, tool: i % 2 === 0 ? 'work' : 'work_retryable' }));
    // Non-retryable calls take long enough (1 s) that the doomed worker is sure to hold some when it dies.
    const answers = calls.map((c) => settle(client.call(c.tool, { ms: c.tool === 'work' ? 1000 : 150 }, { id: c.id, timeoutMs: 60_000 })));
    // Kill once the load is on and the doomed worker itself runs a non-retryable call: the dispatcher hands calls
    // out in batches, so one worker can take the whole early load while the other holds none.
    const nonRetryable = calls.filter((c) => c.tool === 'work').map((c) => `${fleet.prefix}:test:running-on:{${c.id}}`);
    await until('80 calls to have started', async () => (await callsStarted(calls)) >= 80, { intervalMs: 10 });
    await until(`the doomed worker (pid ${doomed.pid}) to run a non-retryable call`, async () => (await counters.mget(nonRetryable)).includes(String(doomed.pid)), { intervalMs: 10 });
    const killedAt = Date.now();
    await doomed.stop('SIGKILL');
    const outcomes = await Promise.all(answers);
    const lastAnswerMs = Date.now() - killedAt;

    const runCounts = await runs(calls.map((c) => c.id));
    calls.forEach((call, i) => {
      const outcome = outcomes[i]!;
      expect(outcome, call.id).not.toBeInstanceOf(Error);
      const result = outcome as ToolResult;
      if (call.tool === 'work') {
        // Non-retryable: at most one run, whatever happened to its worker.
        expect(runCounts[i], call.id).toBeLessThanOrEqual(1);
        if (result.isError) expect(result.error?.code, call.id).toBe('WORKER_LOST');
      } else {
        expect(result.isError, `${call.id}: ${result.content}`).toBe(false);
      }
    });
    // Each call's record holds the one answer its agent got.
    const views = await Promise.all(calls.slice(0, 50).map((c) => client.get(c.id)));
    views.forEach((view, i) => expect(view.result).toEqual(outcomes[i]));
    const lost = outcomes.filter((o) => !(o instanceof Error) && o.error?.code === 'WORKER_LOST').length;
    expect(lost).toBeGreaterThan(0);
    figures.workerKill9 = { calls: calls.length, outcomes: tally(outcomes), retryableReRun: runCounts.filter((n, i) => calls[i]!.tool === 'work_retryable' && n > 1).length, lastAnswerAfterKillMs: lastAnswerMs };
  }, 90_000);

  it('Redis killed and restarted under load (AOF, appendfsync always): no accepted call is lost, and every process reconnects by itself', async () => {
    const durable = new DurableRedis(await freePort());
    try {
      await durable.start();
      const env = { REDIS_URL: durable.url, FORGE_TEST_REDIS_URL: redisUrl() };
      await Promise.all([fleet.worker({ tier: 'platform', concurrency: 32, env }), fleet.worker({ tier: 'platform', concurrency: 32, env })]);
      const { url } = await fleet.dispatcher(env);
      const client = new FleetClient({ url, retryWindowMs: 60_000 });
      clients.push(client);

      const calls = Array.from({ length: 600 }, (_, i) => ({ id: `aof-${i}-${randomUUID()}`, tool: i % 2 === 0 ? 'work' : 'work_retryable' }));
      // Spread over time so that submissions, runs and results all meet the outage.
      const answers = calls.map(async (c, i) => {
        await new Promise((r) => setTimeout(r, Math.floor(i / 50) * 150));
        return settle(client.call(c.tool, { ms: 100 }, { id: c.id, timeoutMs: 120_000 }));
      });
      await until('150 calls to have started', async () => (await callsStarted(calls)) >= 150, { intervalMs: 10 });
      await durable.kill();
      const downAt = Date.now();
      // The outage itself (part of the load's shape, not a wait for anything): Redis stays down this long.
      await new Promise((r) => setTimeout(r, 1500));
      await durable.start();
      const restartedAt = Date.now();

      // A call submitted after the restart is served: the fleet found its way back without help.
      const probe = await client.call('work', { ms: 0 }, { id: `aof-probe-${randomUUID()}`, timeoutMs: 60_000 });
      const recoveredMs = Date.now() - restartedAt;
      expect(probe.isError).toBe(false);

      const outcomes = await Promise.all(answers);
      const runCounts = await runs(calls.map((c) => c.id));
      calls.forEach((call, i) => {
        const outcome = outcomes[i]!;
        expect(outcome instanceof Error ? `${outcome.message}` : 'answered', call.id).toBe('answered');
        const result = outcome as ToolResult;
        if (call.tool === 'work') expect(runCounts[i], call.id).toBeLessThanOrEqual(1);
        if (result.isError) expect(['WORKER_LOST', 'EXECUTION_FAILED'], `${call.id}: ${result.content}`).toContain(result.error?.code);
      });
      figures.redisRestart = { calls: calls.length, downMs: restartedAt - downAt, firstCallAfterRestartMs: recoveredMs, outcomes: tally(outcomes), nonRetryableRunTwice: runCounts.filter((n, i) => calls[i]!.tool === 'work' && n > 1).length };
    } finally {
      await durable.stop();
    }
  }, 180_000);

  it("a worker whose Redis goes away before any dispatcher checked its key keeps running, and a SIGTERM then stops it at once, through its own shutdown", async () => {
    const redis = new DurableRedis(await freePort());
    await redis.start();
    try {
      const own = new TestFleet({ redisUrl: redis.url });
      try {
        // No dispatcher: the lane's key check is unread, and the worker reads it again at each lease renewal.
        const worker = await own.worker({ tier: 'host', env: { FORGE_LEASE_MS: '1500' } });
        expect(worker.output()).toContain('no dispatcher has published');
        await redis.kill();
        // A failed read of the check is no verdict on the key (the worker used to take it for a wrong key, and exit).
        await until('the worker to find its key check unreadable', () => worker.output().includes("could not read the lane's key check"));
        expect(worker.output()).not.toContain('is not its lane');
        expect(worker.proc.exitCode).toBeNull();
        expect(await worker.stop('SIGTERM')).toBe(0);
        expect(worker.output()).toContain('stopping while Redis is away');
        // Not its process's last resort, which waits its shutdown grace and then some.
        expect(worker.output()).not.toContain('exiting with work still open');
      } finally {
        // The fleet's clean-up removes its keys: Redis must be there for it.
        await redis.start();
        await own.stopAll();
      }
    } finally {
      await redis.stop();
    }
  });

  it('a call whose record was written without its job (Redis died between the two) runs once when its id is submitted again', async () => {
    await fleet.worker({ tier: 'platform' });
    const { url } = await fleet.dispatcher();
    const client = new FleetClient({ url });
    clients.push(client);
    const id = `orphan-${randomUUID()}`;
    // What the dead write left: the record, queued for 10 s, and no job anywhere.
    const store = new CallStore(counters, fleetKeys(fleet.prefix), 60_000);
    const envelope = { v: 1 as const, call: { id, name: 'work', arguments: { ms: 0 } }, tier: 'platform' as const, replyTo: 'a-dead-dispatcher', enqueuedAt: Date.now() - 10_000, token: 'lost-job' };
    expect(await store.create({ id, lane: 'platform', name: 'work', status: 'queued', replyTo: 'a-dead-dispatcher', envelope })).toEqual({ created: true });
    const result = await client.call('work', { ms: 0 }, { id, timeoutMs: 15_000 });
    expect(result.isError).toBe(false);
    expect(await runs([id])).toEqual([1]);
  });

  it('a resubmission of a call still waiting behind others re-enqueues it, and it still runs exactly once', async () => {
    await fleet.worker({ tier: 'platform', concurrency: 1 });
    const dispatcher = await fleet.dispatcher();
    const client = new FleetClient({ url: dispatcher.url });
    clients.push(client);
    const [blocker, waiting] = [`blocker-${randomUUID()}`, `waiting-${randomUUID()}`];
    await client.submit('gated', {}, { id: blocker });
    expect(await counters.blpop(`${fleet.prefix}:test:started:{${blocker}}`, 15)).not.toBeNull();
    expect((await client.submit('work', { ms: 0 }, { id: waiting })).status).toBe('queued');
    const store = new CallStore(counters, fleetKeys(fleet.prefix), 60_000);
    const tokenOf = async (id: string): Promise<string | undefined> => (await store.get(id))?.envelope?.token;
    const firstToken = await tokenOf(waiting);
    expect(firstToken).toEqual(expect.any(String));
    // Submitted again (a client retrying after a lost answer) until a resubmission takes the call over, which the
    // dispatcher does only once it has been queued for a while: the test watches for the take-over (a new token on
    // the record) rather than sleeping past the dispatcher's threshold. Any answer but `queued` ends the wait.
    const resubmitted = await until(
      'a resubmission to take the queued call over (a new token on its record)',
      async () => {
        const { status } = await client.submit('work', { ms: 0 }, { id: waiting });
        return status !== 'queued' ? status : (await tokenOf(waiting)) !== firstToken && status;
      },
      { intervalMs: 100 },
    );
    expect(resubmitted).toBe('queued');
    await counters.lpush(`${fleet.prefix}:test:release:{${blocker}}`, '1');
    const result = await client.wait(waiting, { timeoutMs: 15_000 });
    expect(result.isError, result.content).toBe(false);
    expect(await runs([waiting])).toEqual([1]);
    // It was taken over (a second job), and the first job was skipped.
    expect(dispatcher.output()).toContain('enqueued it again under a new token');
  });

  it('a dispatcher killed with agents waiting on it: they re-wait on another and get every result, each call run once', async () => {
    await Promise.all([fleet.worker({ tier: 'platform', concurrency: 64 }), fleet.worker({ tier: 'platform', concurrency: 64 })]);
    const [first, second] = await Promise.all([fleet.dispatcher(), fleet.dispatcher()]);
    // Eight agents; each knows both dispatchers and starts on the first. Half send on call streams, half in batch
    // requests: both must send again what the dead dispatcher left unanswered.
    const agents = Array.from({ length: 8 }, (_, i) => new FleetClient({ url: [first.url, second.url], stream: i % 2 === 0 }));
    clients.push(...agents);
    const calls = Array.from({ length: 800 }, (_, i) => ({ id: `dkill-${i}-${randomUUID()}`, agent: agents[i % agents.length]! }));
    const answers = calls.map((c) => settle(c.agent.call('work', { ms: 300 }, { id: c.id, timeoutMs: 60_000 })));
    await until('100 calls to have started', async () => (await callsStarted(calls)) >= 100, { intervalMs: 10 });
    const killedAt = Date.now();
    await first.stop('SIGKILL');
    const outcomes = await Promise.all(answers);
    const lastAnswerMs = Date.now() - killedAt;
    const runCounts = await runs(calls.map((c) => c.id));
    calls.forEach((call, i) => {
      const outcome = outcomes[i]!;
      expect(outcome instanceof Error ? outcome.message : 'answered', call.id).toBe('answered');
      expect((outcome as ToolResult).isError, call.id).toBe(false);
      expect(runCounts[i], call.id).toBe(1);
    });
    figures.dispatcherKill9 = { calls: calls.length, agents: agents.length, outcomes: tally(outcomes), lastAnswerAfterKillMs: lastAnswerMs };
  }, 90_000);
});
