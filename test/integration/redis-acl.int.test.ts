import type { ChildProcess } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort } from '@forge-fleet/local-redis';
import { type AuditEntry, type CallEnvelope, queueName, type ReplyMessage, type Tier, ToolDefinition, type ToolResult } from '@forge-fleet/shared';
import { AuditArchivist, AuditReader, CallStore, Catalog, QueueStatsReader, RedisAuditLogger, ReplyInbox, TierQueues, fleetKeys, packQueueName } from '@forge-fleet/store';
import { type Job, Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AclRedis, generateAcl, startRedisServer, stopRedisServer } from '../fixtures/acl-redis.js';
import { ROOT } from '../fixtures/fleet.js';

/**
 * The generated ACL file, loaded by a redis-server of this file's own, with
 * real BullMQ and the fleet's own store classes connecting as each role.
 */

const prefix = `acl${randomBytes(4).toString('hex')}`;
const keys = fleetKeys(prefix);
const pools = ['gpu', 'cpu'];
type Role = 'dispatcher' | 'audit' | 'worker-platform' | 'worker-embedded' | 'worker-host' | 'worker-host-gpu' | 'worker-host-cpu' | 'admin';

interface LayoutUser {
  readonly role: string;
  readonly name: string;
  readonly queues: readonly string[];
  readonly keys: readonly string[];
  readonly channels: readonly string[];
  readonly selectors: readonly string[];
}

const generate = generateAcl;

/** Redis glob (`*` only: the generator refuses names holding other metacharacters) as a RegExp. */
const globToRegExp = (glob: string): RegExp => new RegExp(`^${glob.split('*').map((s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('.*')}$`);

let acl: AclRedis;
const connect = (role: Role): Redis => acl.connect(role);
const startServer = (aclFile: string, serverPort: number): Promise<ChildProcess> => startRedisServer(aclFile, serverPort, acl.dir);
const stopServer = stopRedisServer;

const envelope = (id: string, tier: Tier, replyTo: string): CallEnvelope => ({
  v: 1,
  call: { id, name: 'echo', arguments: { text: 'hi' } },
  tier,
  replyTo,
  enqueuedAt: Date.now(),
});
const echoDefinition = ToolDefinition.parse({ name: 'echo', description: 'Echoes its input.', tier: 'platform' });

/** Opens a queue as `role` with a connection of its own (BullMQ defines its scripts on it). */
function queueAs(role: Role, name: string): Queue {
  return new Queue(name, { connection: connect(role), prefix });
}

/** Runs a Worker as `role` until it has completed one job, then closes it; returns what it processed. */
async function completeOne(role: Role, name: string): Promise<Job> {
  const worker = new Worker(name, (job) => Promise.resolve({ echoed: job.data as unknown }), { connection: connect(role), prefix, autorun: true });
  try {
    return await new Promise<Job>((resolve, reject) => {
      worker.on('completed', (job) => resolve(job));
      worker.on('failed', (_job, error) => reject(error));
      worker.on('error', reject);
    });
  } finally {
    await worker.close();
  }
}

const NOPERM = /NOPERM/;

beforeAll(async () => {
  acl = await AclRedis.start({ prefix, hostPools: pools });
});

afterAll(async () => {
  await acl.stop();
});

describe('the ACL generator', () => {
  it('names queues and keys exactly as packages/shared does', () => {
    const users = JSON.parse(generate(['--prefix', prefix, '--host-pools', pools.join(','), '--layout'])) as LayoutUser[];
    const byRole = new Map(users.map((u) => [u.role, u]));
    expect(byRole.get('worker-platform')?.queues).toEqual([queueName(prefix, 'platform')]);
    expect(byRole.get('worker-embedded')?.queues).toEqual([queueName(prefix, 'embedded')]);
    expect(byRole.get('worker-host')?.queues).toEqual([queueName(prefix, 'host')]);
    for (const pool of pools) expect(byRole.get(`worker-host-${pool}`)?.queues).toEqual([queueName(prefix, 'host', pool)]);
    expect(byRole.get('dispatcher')?.queues).toEqual([...(['platform', 'embedded', 'host'] as const).map((t) => queueName(prefix, t)), ...pools.map((p) => queueName(prefix, 'host', p))]);

    const matches = (user: LayoutUser | undefined, key: string): boolean => (user?.keys ?? []).some((k) => globToRegExp(k.replace(/^(%[RW]+)?~/, '')).test(key));
    const worker = byRole.get('worker-platform');
    const platformPack = packQueueName(queueName(prefix, 'platform'), '0123456789abcde');
    for (const key of [keys.call('platform', 'c1'), keys.watchers('platform', 'c1'), keys.replies('platform', 'd1'), keys.catalogDefinitions('platform'), keys.catalogLeases('platform', 'echo'), keys.catalogPacks('platform'), keys.catalogPackLeases('platform', 'p1'), keys.catalogLanes, keys.keyChecks, `${prefix}:${queueName(prefix, 'platform')}:wait`, `${prefix}:${platformPack}:wait`]) {
      expect(matches(worker, key), key).toBe(true);
    }
    // Every tool pack's queue of a lane is under the lane's pattern, and no other lane's is.
    const hostPack = packQueueName(queueName(prefix, 'host'), '0123456789abcde');
    const poolPack = packQueueName(queueName(prefix, 'host', pools[0]), '0123456789abcde');
    expect(matches(byRole.get('worker-host'), `${prefix}:${hostPack}:wait`)).toBe(true);
    expect(matches(byRole.get('worker-host'), `${prefix}:${poolPack}:wait`)).toBe(false);
    expect(matches(worker, `${prefix}:${hostPack}:wait`)).toBe(false);
    expect(matches(byRole.get('dispatcher'), `${prefix}:${poolPack}:wait`)).toBe(true);
    expect(byRole.get('worker-platform')?.keys).toContain(`%R~${keys.keyChecks}`);
    expect(byRole.get('dispatcher')?.keys).toContain(`~${keys.keyChecks}`);
    // Another lane's call records and reply lists, and the dispatchers' lane index, are out of its reach.
    for (const key of [keys.call('host', 'c1'), keys.call(`host.${pools[0]!}`, 'c1'), keys.watchers('embedded', 'c1'), keys.replies('host', 'd1'), keys.callLane('c1'), keys.catalogDefinitions('host'), keys.catalogLeases('host', 'echo')]) {
      expect(matches(worker, key), key).toBe(false);
    }
    expect(matches(byRole.get('worker-host'), keys.call(`host.${pools[0]!}`, 'c1'))).toBe(false);
    for (const key of [keys.call('host', 'c1'), keys.callLane('c1'), keys.replies(`host.${pools[0]!}`, 'd1'), keys.approvals]) expect(matches(byRole.get('dispatcher'), key), key).toBe(true);
    // The approval index is the dispatchers' alone.
    expect(matches(worker, keys.approvals)).toBe(false);
    // Audit: each writer may append to its own inbox (a selector with RPUSH alone); only the audit keeper touches the stream.
    expect(worker?.selectors).toEqual([`(%W~${keys.auditInbox('platform')} +rpush)`]);
    expect(byRole.get('dispatcher')?.selectors).toEqual([`(%W~${keys.auditInbox('dispatcher')} +rpush)`]);
    for (const role of ['dispatcher', 'worker-platform', 'worker-host']) {
      for (const key of [keys.audit, keys.auditInbox('dispatcher'), keys.auditInbox('platform')]) expect(matches(byRole.get(role), key), `${role} ${key}`).toBe(false);
    }
    expect(matches(byRole.get('audit'), keys.audit)).toBe(true);
    expect(matches(byRole.get('audit'), keys.auditInbox('host.gpu'))).toBe(true);
    // A lane's execution records (the replay barrier): its own workers only.
    expect(matches(worker, keys.executions('platform', 'c1', 'm'))).toBe(true);
    expect(matches(worker, keys.executions('host', 'c1', 'm'))).toBe(false);
    expect(matches(byRole.get('worker-host'), keys.executions(`host.${pools[0]!}`, 'c1', 'm'))).toBe(false);
    expect(matches(byRole.get('dispatcher'), keys.executions('platform', 'c1', 'm'))).toBe(false);
    expect(matches(worker, `${prefix}:${queueName(prefix, 'host')}:wait`)).toBe(false);
    expect(worker?.channels).toEqual(expect.arrayContaining([keys.cancelChannel('platform'), keys.catalogChannel]));
    expect(worker?.channels).not.toContain(keys.cancelChannel('host'));
    // MCP cancellations relayed between dispatchers carry client keys: dispatchers only.
    expect(byRole.get('dispatcher')?.channels).toContain(keys.mcpCancelChannel);
    expect(worker?.channels).not.toContain(keys.mcpCancelChannel);
  });

  it('keeps the committed infra/redis/fleet.acl in step with the generator', () => {
    const committed = readFileSync(join(ROOT, 'infra', 'redis', 'fleet.acl'), 'utf8');
    expect(committed).toBe(generate(['--template', '--admin']));
    // No usable secret: every user is off and carries no password.
    for (const line of committed.trim().split('\n')) {
      expect(line).toMatch(/^user \S+ off /);
      expect(line).not.toMatch(/ (>|#|nopass)/);
    }
  });

  it('lets nobody in with the committed file', async () => {
    const otherPort = await freePort();
    const other = await startServer(join(ROOT, 'infra', 'redis', 'fleet.acl'), otherPort);
    // No ready check: its INFO would be refused (nobody is logged in) and ioredis would hang up.
    const probe = new Redis(`redis://127.0.0.1:${otherPort}`, { lazyConnect: true, enableReadyCheck: false, maxRetriesPerRequest: 0, retryStrategy: () => null });
    probe.on('error', () => {});
    try {
      await probe.connect();
      await expect(probe.call('AUTH', 'forge-dispatcher', 'anything')).rejects.toThrow(/WRONGPASS/);
      await expect(probe.call('AUTH', 'forge-worker-platform', '')).rejects.toThrow(/WRONGPASS/);
      await expect(probe.get('x')).rejects.toThrow(/NOAUTH/);
    } finally {
      probe.disconnect();
      await stopServer(other);
    }
  });

  it('refuses names that would be glob patterns', () => {
    expect(() => generate(['--template', '--host-pools', 'gpu*'])).toThrow(/host pool 'gpu\*'/);
    expect(() => generate(['--template', '--prefix', 'a[b]'])).toThrow(/prefix 'a\[b\]'/);
  });
});

describe('a sandbox (platform) worker under the ACL', () => {
  const platform = queueName(prefix, 'platform');
  const host = queueName(prefix, 'host');
  let hostJobId: string;
  let hostQueueAsDispatcher: Queue;

  beforeAll(async () => {
    hostQueueAsDispatcher = queueAs('dispatcher', host);
    hostJobId = (await hostQueueAsDispatcher.add('shell', { cmd: 'id' })).id!;
  });
  afterAll(async () => {
    await hostQueueAsDispatcher.close();
  });

  it('takes and completes its own jobs', async () => {
    const queue = queueAs('dispatcher', platform);
    try {
      const added = await queue.add('echo', { text: 'hi' });
      const done = await completeOne('worker-platform', platform);
      expect(done.id).toBe(added.id);
      expect(done.returnvalue).toEqual({ echoed: { text: 'hi' } });
    } finally {
      await queue.close();
    }
  });

  it('cannot read host jobs', async () => {
    const redis = connect('worker-platform');
    await expect(redis.hgetall(`${prefix}:${host}:${hostJobId}`)).rejects.toThrow(NOPERM);
    await expect(redis.lrange(`${prefix}:${host}:wait`, 0, -1)).rejects.toThrow(NOPERM);
    const hostQueue = queueAs('worker-platform', host);
    try {
      await expect(hostQueue.getJob(hostJobId)).rejects.toThrow(NOPERM);
      await expect(hostQueue.getJobCounts('wait')).rejects.toThrow(NOPERM);
    } finally {
      await hostQueue.close();
    }
  });

  it('cannot take host jobs: a Worker on the host queue is refused and the job stays waiting', async () => {
    let processed = 0;
    let taken: (job: Job) => void = () => {};
    const worker = new Worker(
      host,
      (job) => {
        processed++;
        taken(job);
        return Promise.resolve();
      },
      { connection: connect('worker-platform'), prefix, autorun: true },
    );
    try {
      // Whichever comes first: the refusal, or (were the ACL too wide) the job. A listener for the whole run:
      // BullMQ prints errors emitted while nobody listens.
      const outcome = await new Promise<Error | Job>((resolve) => {
        taken = resolve;
        worker.on('error', resolve);
      });
      expect(outcome).toBeInstanceOf(Error);
      expect((outcome as Error).message).toMatch(NOPERM);
    } finally {
      await worker.close(true);
    }
    expect(processed).toBe(0);
    expect(await hostQueueAsDispatcher.getJobState(hostJobId)).toBe('waiting');
    // The primitive moveToActive is built on, refused inside a script too (Redis checks each call's keys).
    const redis = connect('worker-platform');
    await expect(redis.eval(`return redis.call('RPOPLPUSH', KEYS[1], KEYS[2])`, 2, `${prefix}:${host}:wait`, `${prefix}:${host}:active`)).rejects.toThrow(NOPERM);
    await expect(redis.eval(`return redis.call('RPOPLPUSH', '${prefix}:${host}:wait', '${prefix}:${host}:active')`, 0)).rejects.toThrow(/can't access at least one of the keys/);
  });

  it('cannot alter or add host jobs', async () => {
    const redis = connect('worker-platform');
    const jobKey = `${prefix}:${host}:${hostJobId}`;
    await expect(redis.del(jobKey)).rejects.toThrow(NOPERM);
    await expect(redis.hset(jobKey, 'data', '{"cmd":"rm -rf /"}')).rejects.toThrow(NOPERM);
    await expect(redis.lpush(`${prefix}:${host}:wait`, 'forged')).rejects.toThrow(NOPERM);
    const hostQueue = queueAs('worker-platform', host);
    try {
      await expect(hostQueue.add('shell', { cmd: 'id' })).rejects.toThrow(NOPERM);
    } finally {
      await hostQueue.close();
    }
    const job = await hostQueueAsDispatcher.getJob(hostJobId);
    expect(job?.data).toEqual({ cmd: 'id' });
  });

  it('cannot switch databases, list keys, flush or reconfigure the server, nor touch the audit stream but through its inbox', async () => {
    const redis = connect('worker-platform');
    await expect(redis.select(1)).rejects.toThrow(NOPERM);
    await expect(redis.keys('*')).rejects.toThrow(NOPERM);
    await expect(redis.scan(0)).rejects.toThrow(NOPERM);
    await expect(redis.flushall()).rejects.toThrow(NOPERM);
    await expect(redis.flushdb()).rejects.toThrow(NOPERM);
    await expect(redis.config('GET', '*')).rejects.toThrow(NOPERM);
    await expect(redis.call('ACL', 'LIST')).rejects.toThrow(NOPERM);
    await expect(redis.rpush(keys.auditInbox('platform'), 'audit\n{}')).resolves.toBeGreaterThan(0);
    await expect(redis.xadd(keys.audit, '*', 'kind', 'audit', 'entry', '{}')).rejects.toThrow(NOPERM);
    await expect(redis.xrange(keys.audit, '-', '+')).rejects.toThrow(NOPERM);
    await expect(redis.lrange(keys.auditInbox('platform'), 0, -1)).rejects.toThrow(NOPERM);
    await expect(redis.get(`${prefix}-other-fleet`)).rejects.toThrow(NOPERM);
  });
});

describe('the dispatcher under the ACL', () => {
  it('enqueues on every tier and pool queue', async () => {
    const names = [...(['platform', 'embedded', 'host'] as const).map((t) => queueName(prefix, t)), ...pools.map((p) => queueName(prefix, 'host', p))];
    for (const name of names) {
      const queue = queueAs('dispatcher', name);
      try {
        const job = await queue.add('probe', { to: name });
        expect(await queue.getJobState(job.id!)).toBe('waiting');
        await job.remove();
      } finally {
        await queue.close();
      }
    }
  });

  it('indexes calls waiting for a person and sweeps them by deadline', async () => {
    const store = new CallStore(connect('dispatcher'), keys, 60_000);
    const id = `waiting-${Date.now()}`;
    await store.indexApproval(id, 1000);
    expect(await store.approvalIds({ dueBy: 2000 })).toContain(id);
    await store.unindexApproval(id);
    expect(await store.approvalIds()).not.toContain(id);
  });

  it('reads the catalog but cannot write it', async () => {
    const redis = connect('dispatcher');
    await expect(redis.hgetall(keys.catalogDefinitions('host'))).resolves.toEqual({});
    await expect(redis.hset(keys.catalogDefinitions('host'), 'echo', '{}')).rejects.toThrow(NOPERM);
    await expect(redis.zadd(keys.catalogLeases('host', 'echo'), Date.now() + 60_000, 'fake-worker')).rejects.toThrow(NOPERM);
    await expect(redis.sadd(keys.catalogLanes, 'fake')).rejects.toThrow(NOPERM);
  });

  it('keeps serving the queue view when a worker registers bogus lanes and packs (issue #15, item 8)', async () => {
    const worker = connect('worker-platform');
    const dispatcher = connect('dispatcher');
    // A compromised platform worker may SADD any name into the lane set, and write anything into its own lane's packs.
    const bogus = ['host.evil', 'bogus lane*', '{x}', 'host.', 'a'.repeat(300)];
    await worker.sadd(keys.catalogLanes, 'platform', ...bogus);
    await worker.hset(keys.catalogPacks('platform'), 'not a pack!', '[]', 'zzzzzzzzzzzzzzz', '{"not":"pairs"}');
    const reader = new QueueStatsReader({ redis: dispatcher, keys });
    try {
      const stats = await reader.read();
      for (const q of stats.queues) expect(bogus).not.toContain(q.lane);
      const snapshot = await new Catalog(dispatcher, keys).snapshot();
      // A well-formed pool lane (`host.evil`) is kept: a pool's first worker registers its lane before it announces
      // tools (to get its key check); it has no tools, so it serves nothing and shows no queue. The others are left out.
      expect(snapshot.lanes.filter((l) => bogus.includes(l))).toEqual(['host.evil']);
      // Each left-out entry is named (the dispatcher logs them), and nothing else was lost.
      expect(snapshot.skipped.join('\n')).toMatch(/bogus lane/);
      expect(snapshot.skipped.join('\n')).toMatch(/zzzzzzzzzzzzzzz/);
    } finally {
      await reader.close();
      await worker.srem(keys.catalogLanes, ...bogus);
      await worker.hdel(keys.catalogPacks('platform'), 'not a pack!', 'zzzzzzzzzzzzzzz');
    }
  });

  it('cannot switch databases or flush', async () => {
    const redis = connect('dispatcher');
    await expect(redis.select(1)).rejects.toThrow(NOPERM);
    await expect(redis.flushall()).rejects.toThrow(NOPERM);
    await expect(redis.keys('*')).rejects.toThrow(NOPERM);
  });
});

describe('host pools under the ACL', () => {
  it('a pool worker serves its pool queue only', async () => {
    const gpu = queueName(prefix, 'host', 'gpu');
    const queue = queueAs('dispatcher', gpu);
    try {
      const added = await queue.add('render', { frame: 1 });
      expect((await completeOne('worker-host-gpu', gpu)).id).toBe(added.id);
    } finally {
      await queue.close();
    }
    const redis = connect('worker-host-gpu');
    for (const other of [queueName(prefix, 'host'), queueName(prefix, 'host', 'cpu'), queueName(prefix, 'platform')]) {
      await expect(redis.lrange(`${prefix}:${other}:wait`, 0, -1), other).rejects.toThrow(NOPERM);
    }
  });

  it('the pool-less host worker cannot reach pool queues', async () => {
    const redis = connect('worker-host');
    await expect(redis.lrange(`${prefix}:${queueName(prefix, 'host')}:wait`, 0, -1)).resolves.toBeInstanceOf(Array);
    await expect(redis.lrange(`${prefix}:${queueName(prefix, 'host', 'gpu')}:wait`, 0, -1)).rejects.toThrow(NOPERM);
  });
});

describe('the fleet’s own Redis code under the ACL', () => {
  it('records, enqueues, runs, answers and audits a call with each role doing its part', async () => {
    const dispatcherCommands = connect('dispatcher');
    const dispatcherQueues = connect('dispatcher');
    const dispatcherBlocking = connect('dispatcher');
    const workerCommands = connect('worker-platform');
    const retention = 60_000;
    const dispatcherId = `d-${randomUUID()}`;
    const watcherId = `d-${randomUUID()}`;

    // Worker side: announce the tool (ANNOUNCE_TOOLS script + PUBLISH).
    const workerCatalog = new Catalog(workerCommands, keys);
    await workerCatalog.announce('platform', 'w1', [echoDefinition], 60_000, { notify: true });
    // And renews its leases alone: RENEW_LEASES runs under the worker's user (a command the ACL refused would throw here).
    const lease = await workerCommands.zscore(keys.catalogLeases('platform', 'echo'), 'w1');
    await new Promise((resolve) => setTimeout(resolve, 5));
    await workerCatalog.renew('platform', 'w1', [echoDefinition], 60_000);
    expect(Number(await workerCommands.zscore(keys.catalogLeases('platform', 'echo'), 'w1'))).toBeGreaterThan(Number(lease));
    // Its own lane only: a platform worker cannot claim a tool in the host lane.
    await expect(workerCatalog.announce('host', 'w1', [{ ...echoDefinition, name: 'db_query', tier: 'host' }], 60_000)).rejects.toThrow(NOPERM);
    const snapshot = await new Catalog(dispatcherCommands, keys).snapshot();
    expect(snapshot.entries.get('echo')?.liveWorkers).toBe(1);

    // Dispatcher side: the submit pipeline (EVAL CREATE_CALL + ZCOUNT + BullMQ addJob on one connection).
    const inbox = new ReplyInbox(dispatcherBlocking, keys, dispatcherId, { lanes: ['platform', 'embedded', 'host'] });
    inbox.start();
    const queues = new TierQueues(dispatcherQueues, keys, retention);
    const dispatcherStore = new CallStore(dispatcherCommands, keys, retention);
    const id = randomUUID();
    const env = envelope(id, 'platform', dispatcherId);
    try {
      const route = workerCatalog.packQueue('platform', [echoDefinition]);
      const submitted = await queues.submit({ id, lane: 'platform', name: 'echo', status: 'queued', replyTo: dispatcherId, envelope: env }, { queue: route.queue, pack: route.pack.id });
      expect(submitted).toEqual({ created: true, live: 1 });
      expect((await dispatcherStore.watch(id, watcherId))?.status).toBe('queued');
      const reply = inbox.wait(id, 20_000);

      // Worker side: BullMQ takes the job; our scripts start and finish the call (inline LPUSH to the submitter).
      const workerStore = new CallStore(workerCommands, keys, retention);
      const result: ToolResult = { toolCallId: id, name: 'echo', content: 'hi', isError: false };
      const worker = new Worker(
        route.queue,
        async (job: Job<CallEnvelope>) => {
          expect((await workerStore.start('platform', job.data.call.id, 'w1')).outcome).toBe('started');
          return workerStore.end('platform', job.data.call.id, 'completed', result, { replyTo: job.data.replyTo });
        },
        { connection: connect('worker-platform'), prefix, autorun: true },
      );
      let ended: unknown;
      try {
        ended = await new Promise((resolve, reject) => {
          worker.on('completed', (_job, value) => resolve(value));
          worker.on('failed', (_job, error) => reject(error));
          worker.on('error', reject);
        });
      } finally {
        await worker.close();
      }
      expect(ended).toBe(true);
      expect(await reply).toMatchObject({ id, status: 'completed', result } satisfies Partial<ReplyMessage>);
      // The reply to the other dispatcher went out through ReplyPublisher (LPUSH + PEXPIRE).
      expect(await dispatcherCommands.lrange(keys.replies('platform', watcherId), 0, -1)).toHaveLength(1);
      // The platform worker's user can neither read nor write a Host call's record, nor find calls by id.
      const hostCall = randomUUID();
      await dispatcherStore.create({ id: hostCall, lane: 'host', name: 'echo', status: 'queued', replyTo: dispatcherId, envelope: envelope(hostCall, 'host', dispatcherId) });
      await expect(workerCommands.hgetall(keys.call('host', hostCall))).rejects.toThrow(NOPERM);
      await expect(workerCommands.hset(keys.call('host', hostCall), 'status', 'completed')).rejects.toThrow(NOPERM);
      await expect(workerStore.end('host', hostCall, 'completed', result)).rejects.toThrow(NOPERM);
      await expect(workerCommands.get(keys.callLane(hostCall))).rejects.toThrow(NOPERM);
      expect((await dispatcherStore.get(hostCall))?.status).toBe('queued');
      expect((await dispatcherStore.get(id))?.status).toBe('completed');

      // Audit: the dispatcher and the worker append to their inboxes (several entries in one turn: one RPUSH);
      // the audit keeper files them with their writer and reads them back; the dispatcher's user cannot read.
      const entry: AuditEntry = { at: new Date().toISOString(), callId: id, tool: 'echo', errorCategory: 'out_of_scope', scopeAtListing: null, scopeAtDispatch: 'echo' };
      const dispatcherAudit = new RedisAuditLogger(dispatcherCommands, keys, 'dispatcher');
      const workerAudit = new RedisAuditLogger(workerCommands, keys, 'platform');
      await Promise.all([dispatcherAudit.record(entry), dispatcherAudit.record({ ...entry, tool: 'echo2' }), workerAudit.record({ ...entry, tool: 'echo3' })]);
      await expect(dispatcherCommands.xrange(keys.audit, '-', '+')).rejects.toThrow(NOPERM);
      const keeper = connect('audit');
      const archivist = new AuditArchivist({ redis: keeper, keys, lanes: () => ['platform'], log: { error: () => {} } });
      const filed = await new AuditReader(keeper, keys, archivist).query({ callId: id, limit: 10 });
      expect(filed.map((e) => [e.tool, e.writer]).sort()).toEqual([['echo', 'dispatcher'], ['echo2', 'dispatcher'], ['echo3', 'platform']]);
      // A keeper logged in as the dispatcher's user cannot start: it says which URL to set.
      await expect(new AuditArchivist({ redis: dispatcherCommands, keys, lanes: () => [], log: { error: () => {} } }).start()).rejects.toThrow(/FORGE_AUDIT_REDIS_URL/);
      expect(await dispatcherStore.cancel('platform', id, result)).toEqual({ state: 'final' });
      await workerCatalog.withdraw('platform', 'w1', [echoDefinition]);
    } finally {
      await inbox.stop();
      await queues.close();
    }
  });
});
