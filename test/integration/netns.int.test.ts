import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FleetClient } from '@forge-fleet/client';
import type { ToolResult } from '@forge-fleet/shared';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FleetProcess, ROOT, TestFleet } from '../fixtures/fleet.js';
import { type ExternalService, NetnsLab, netnsUnavailable } from '../fixtures/netns.js';
import { until } from '../fixtures/wait.js';

/**
 * Host-tier workers on a node of their own, with real network isolation: Redis,
 * the dispatcher, a sandboxed Platform worker and a Host worker each run in a
 * Linux network namespace of their own, on one bridge, and an external service
 * hangs off the Host worker's node alone (see test/fixtures/netns.ts). Then the
 * Host worker is cut from Redis while its calls run, two ways: its bridge port
 * goes down (a silent partition), or its own interface goes down and its Redis
 * connections are reset (what a node's network restart does).
 *
 * Locks are 2 s and leases 3 s in these fleets (TestFleet), so losses show
 * within seconds. Nothing here asserts a duration: the figures the fault tests
 * measure are written to test-results/netns-faults.json and annotated.
 */
const unavailable = netnsUnavailable();
const TOOLS = join(ROOT, 'test', 'fixtures', 'netns-tools.ts');

describe.skipIf(unavailable !== undefined)(`host workers on nodes of their own (network namespaces)${unavailable === undefined ? '' : ` — skipped: ${unavailable}`}`, () => {
  let lab: NetnsLab;
  let fleet: TestFleet;
  let service: ExternalService;
  let redis: Redis;
  let client: FleetClient;
  let platform: FleetProcess;
  let host: FleetProcess;
  let dir: string;
  let runsFile: string;
  /** Figures of the fault tests, written to test-results/netns-faults.json. */
  const report: object[] = [];

  beforeAll(async () => {
    lab = NetnsLab.create();
    fleet = new TestFleet();
    dir = mkdtempSync(join(tmpdir(), 'forge-netns-'));
    runsFile = join(dir, 'runs.log');
    writeFileSync(runsFile, '');
    const redisUrl = await lab.startRedis(dir);
    service = await lab.startExternalService();
    redis = new Redis(redisUrl, { maxRetriesPerRequest: 1 });
    const env = { REDIS_URL: redisUrl, FORGE_METRICS_PORT: 'off' };
    // The sandbox stays on, strictly: the worker refuses to start if a namespace or rlimit layer is missing in here.
    platform = await fleet.worker({
      tier: 'platform',
      tools: TOOLS,
      wrapper: lab.platform.wrapper,
      env: { ...env, FORGE_SANDBOX: 'on', FORGE_STRICT_SANDBOX: '1', FORGE_SANDBOX_SIZE: '1' },
    });
    host = await fleet.worker({ tier: 'host', tools: TOOLS, wrapper: lab.host.wrapper, env: { ...env, NETNS_RUNS_FILE: runsFile } });
    const dispatcher = await fleet.dispatcher({ ...env, FORGE_DEV_MODE: '0' }, { wrapper: lab.dispatcher.wrapper, host: lab.dispatcher.ip });
    const token = await fleet.token({ subject: 'netns-test', grants: ['fetch_external', 'slow_host'] });
    client = new FleetClient({ url: dispatcher.url, token, batch: false });
  });

  afterAll(async () => {
    await client?.close();
    redis?.disconnect();
    try {
      await fleet?.stopAll();
    } finally {
      const left = (await lab?.destroy()) ?? [];
      if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
      expect(left, 'namespaces or links left behind').toEqual([]);
    }
  });

  it('only the Host worker reaches the external service; a Platform call to it fails and its worker keeps serving', { timeout: 60_000 }, async () => {
    expect(platform.output()).toMatch(/"network":"namespace".*sandbox ready/);

    const fromHost = await client.call('fetch_external', { url: `${service.url}/host-1` });
    expect(fromHost).toMatchObject({ isError: false, structuredContent: { status: 200, body: 'external service: /host-1' } });

    const fromPlatform = await client.call('fetch_external_platform', { url: `${service.url}/platform-1` });
    expect(fromPlatform).toMatchObject({ isError: true, error: { code: 'EXECUTION_FAILED' } });
    expect(fromPlatform.content).toMatch(/could not fetch .*(ENETUNREACH|EHOSTUNREACH|TimeoutError)/);
    expect(await client.call('netns_echo', { still: 'serving' })).toMatchObject({ isError: false, structuredContent: { echo: { still: 'serving' } } });
    expect(platform.proc.exitCode).toBeNull();

    // The nodes themselves, outside any sandbox: only the Host node has a route to the service.
    const [dispatcherNode, platformNode, redisNode, hostNode] = await Promise.all(
      [lab.dispatcher, lab.platform, lab.redis, lab.host].map((node) => lab.reach(node.ns, `${service.url}/from-${node.ns}`)),
    );
    expect(hostNode).toEqual({ ok: true, detail: `external service: /from-${lab.host.ns}` });
    for (const denied of [dispatcherNode!, platformNode!, redisNode!]) {
      expect(denied.ok).toBe(false);
      expect(denied.detail).toMatch(/^(ENETUNREACH|EHOSTUNREACH|TimeoutError)$/);
    }
    expect(service.hits()).toEqual(['/host-1', `/from-${lab.host.ns}`]);
  });

  /** How the Host node loses Redis in each fault test (returning the connections it reset), and how it gets it back. */
  const cuts: { name: string; down(): number; up(): void }[] = [
    {
      name: 'its bridge port goes down (packets vanish; its connections wait, unbroken)',
      down: () => {
        lab.setLink(lab.host, 'down');
        return 0;
      },
      up: () => lab.setLink(lab.host, 'up'),
    },
    {
      name: 'its own interface goes down and its Redis connections are reset (reconnects fail at once; Redis commands fail after the client’s retries)',
      down: () => {
        lab.setInterface(lab.host, 'down');
        return lab.resetConnections(lab.host, lab.redis.ip);
      },
      up: () => lab.setInterface(lab.host, 'up'),
    },
  ];

  for (const cut of cuts) {
    it(`a Host node cut from Redis — ${cut.name}: its calls stall, then each ends exactly once, none runs twice, and the worker serves again`, { timeout: 180_000 }, async ({ annotate }) => {
      const logFrom = host.output().length;
      const short = Array.from({ length: 4 }, (_, i) => ({ id: `cut-short-${i}-${randomUUID()}`, ms: 2_000 }));
      const long = Array.from({ length: 2 }, (_, i) => ({ id: `cut-long-${i}-${randomUUID()}`, ms: 10_000 }));
      const inFlight = [...short, ...long];
      for (const { id, ms } of inFlight) await client.submit('slow_host', { ms }, { id });
      // Events across namespaces and processes (a file line, a key expiring in Redis, a lease lapsing) have no push
      // channel to the test: it polls for them, each wait bounded and named.
      await until('every call to start on the Host worker', () => inFlight.every(({ id }) => runLines('start', id) === 1));

      const t0 = Date.now();
      const connectionsReset = cut.down();
      // Cut until the calls' BullMQ locks have expired in Redis (the worker cannot renew them), the short runs have
      // ended on the far side of the cut, and the worker's catalog lease has lapsed: both recovery paths (a run that
      // ended unheard, a run still going) and the worker's return to the catalog are exercised.
      // The locks of the jobs of every tool pack's queue of the host lane (`{<prefix>.host}.<pack>`).
      const locks = `${fleet.prefix}:{${fleet.prefix}.host}*:lock`;
      await until('the in-flight calls’ locks to expire', async () => (await redis.keys(locks)).length === 0);
      const locksExpiredMs = Date.now() - t0;
      await until('the short runs to end during the cut', () => short.every(({ id }) => runLines('end', id) === 1));
      const lease = `${fleet.prefix}:{${fleet.prefix}.catalog}:host:leases:slow_host`;
      await until('the Host worker’s catalog lease to lapse', async () => (await redis.zcount(lease, Date.now(), '+inf')) === 0);
      const leaseLapsedMs = Date.now() - t0;
      // Its pack has no live worker any more: the dispatcher ends the calls the cut-off worker held (they are not
      // retryable) as WORKER_LOST instead of leaving them running for as long as the cut lasts.
      await until('the calls held by the cut-off worker to end', async () => {
        for (const { id } of inFlight) if ((await client.get(id)).status === 'running') return false;
        return true;
      });
      for (const { id } of inFlight) expect((await client.get(id)).result?.error?.code, id).toBe('WORKER_LOST');
      const during = `cut-during-${randomUUID()}`;
      const submittedDuring = await client.submit('slow_host', { ms: 100 }, { id: during }).then(
        (view) => view.status,
        (error: unknown) => `refused ${codeOf(error)}`,
      );
      // No live worker serves it: refused before it is accepted (or, accepted as the lease lapsed, ended NO_WORKER).
      expect(submittedDuring).toMatch(/^(queued|refused NO_WORKER)$/);
      const cutMs = Date.now() - t0;
      cut.up();
      const t1 = Date.now();

      const answered = new Map<string, { result: ToolResult; afterUpMs: number }>();
      const answers = Promise.all(
        inFlight.map(async ({ id }) => {
          const result = await client.wait(id, { timeoutMs: 60_000 });
          answered.set(id, { result, afterUpMs: Date.now() - t1 });
        }),
      );
      // The worker is back once a new Host call comes through; NO_WORKER means its lease has not been renewed yet.
      // Any other refusal ends the wait (`until` would retry a check that throws) and fails the expectation below.
      let refusals = 0;
      const after = await until(
        'the Host worker to serve a new call after the cut',
        () =>
          client.call('fetch_external', { url: `${service.url}/after-cut` }, { timeoutMs: 30_000 }).catch((error: unknown) => {
            if (codeOf(error) !== 'NO_WORKER') return { refusedWith: `${codeOf(error)}: ${error instanceof Error ? error.message : String(error)}` };
            refusals++;
            return undefined;
          }),
        { timeoutMs: 60_000, intervalMs: 50 },
      );
      const servingAgainMs = Date.now() - t1;
      expect(after).toMatchObject({ isError: false, structuredContent: { body: 'external service: /after-cut' } });
      await answers;

      // Each call ends with its run's result, or with WORKER_LOST when its lock expired under it and it was not
      // retryable: never a second run, never an untyped failure.
      for (const { id } of inFlight) {
        const { result } = answered.get(id)!;
        if (result.isError) expect(result.error?.code, `${id}: ${result.content}`).toBe('WORKER_LOST');
        else expect(result.structuredContent, id).toMatchObject({ ms: expect.any(Number) as number, aborted: false });
      }
      // Ended NO_WORKER, it never ran: FleetClient throws it.
      if (submittedDuring === 'queued') expect(await client.wait(during, { timeoutMs: 30_000 }).then((r) => r.error?.code ?? 'completed', (e: { code?: string }) => `thrown ${e.code}`)).toMatch(/^(completed|thrown NO_WORKER)$/);

      // The original runs of calls lost to the cut go on to their end; their late finish must change nothing.
      await until('the long runs to end', () => long.every(({ id }) => runLines('end', id) === 1), { timeoutMs: 30_000 });
      expect(await client.call('slow_host', { ms: 0 }, { timeoutMs: 30_000 })).toMatchObject({ isError: false });
      for (const { id } of inFlight) {
        expect(runLines('start', id), `runs of ${id}`).toBe(1);
        expect((await client.get(id)).result, `${id} answered once`).toEqual(answered.get(id)!.result);
        expect(await finalAudits(id), `final audit entries of ${id}`).toBe(1);
      }
      expect(host.proc.exitCode, 'the Host worker process never restarted').toBeNull();

      const outcomes = inFlight.map(({ id, ms }) => {
        const { result, afterUpMs } = answered.get(id)!;
        return { ms, outcome: result.isError ? (result.error?.code ?? 'error') : 'completed', afterUpMs };
      });
      const logged = host
        .output()
        .slice(logFrom)
        .split('\n')
        .filter((line) => /"level":(40|50)/.test(line))
        .map((line) => JSON.parse(line) as { msg?: string; err?: { message?: string } })
        .map((l) => `${l.msg ?? ''}${l.err?.message === undefined ? '' : `: ${l.err.message.replace(/ \d+\.\d+\.\d+\.\d+:\d+.*$/, '')}`}`);
      const unstructured = host
        .output()
        .slice(logFrom)
        .split('\n')
        .filter((line) => line.trim() !== '' && !line.startsWith('{'));
      const figures = {
        cut: cut.name,
        at: new Date().toISOString(),
        lockDurationMs: Number(fleet.env().FORGE_LOCK_DURATION_MS),
        leaseMs: Number(fleet.env().FORGE_LEASE_MS),
        calls: inFlight.length,
        locksExpiredAfterCutMs: locksExpiredMs,
        leaseLapsedAfterCutMs: leaseLapsedMs,
        connectionsReset,
        cutLastedMs: cutMs,
        submittedDuringCut: submittedDuring,
        newCallsRefusedNoWorkerAfterUp: refusals,
        servingAgainAfterUpMs: servingAgainMs,
        lastInFlightAnsweredAfterUpMs: Math.max(...outcomes.map((o) => o.afterUpMs)),
        outcomes,
        hostWorkerWarnings: Object.fromEntries([...new Set(logged)].map((m) => [m, logged.filter((l) => l === m).length])),
        // Lines outside the JSON log (e.g. ioredis printing an error event nobody listens to).
        hostWorkerOtherOutput: unstructured.length,
        hostWorkerOtherOutputFirst: unstructured[0]?.slice(0, 200),
      };
      report.push(figures);
      mkdirSync(join(ROOT, 'test-results'), { recursive: true });
      writeFileSync(join(ROOT, 'test-results', 'netns-faults.json'), `${JSON.stringify(report, null, 2)}\n`);
      await annotate(JSON.stringify({ ...figures, outcomes: outcomes.map((o) => `${o.ms}ms:${o.outcome}@+${o.afterUpMs}ms`) }));
    });
  }

  /** Lines `<kind> <callId> …` the slow tool wrote: its runs, counted outside Redis. */
  function runLines(kind: 'start' | 'end', id: string): number {
    return readFileSync(runsFile, 'utf8')
      .split('\n')
      .filter((line) => line.startsWith(`${kind} ${id} `)).length;
  }

  /** Entries in the audit stream that end `id` (completed, failed, cancelled): one per call, written by whoever ended it. */
  async function finalAudits(id: string): Promise<number> {
    const entries = await redis.xrange(`${fleet.prefix}:{${fleet.prefix}.audit}`, '-', '+');
    return entries
      .map(([, fields]) => fields)
      .filter((fields) => fields[1] === 'audit')
      .map((fields) => JSON.parse(fields[3] ?? '{}') as { callId?: string; decision?: string })
      .filter((e) => e.callId === id && ['completed', 'failed', 'cancelled'].includes(e.decision ?? '')).length;
  }
});

/** The `code` of a FleetError the client threw (they cross HTTP as data, so no class check). */
function codeOf(error: unknown): string {
  const code = typeof error === 'object' && error !== null && 'code' in error ? error.code : undefined;
  return typeof code === 'string' ? code : `no code (${error instanceof Error ? error.message : typeof error})`;
}
