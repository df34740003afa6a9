import { randomBytes, randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { FleetClient } from '@forge-fleet/client';
import { type CallEnvelope } from '@forge-fleet/shared';
import { callsOfJob, fleetKeys, packQueueName } from '@forge-fleet/store';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AclRedis } from '../fixtures/acl-redis.js';
import { type FleetProcess, ROOT, TestFleet } from '../fixtures/fleet.js';
import { redisUrl } from '../fixtures/redis.js';
import { until } from '../fixtures/wait.js';

/**
 * Issue #15, items 5–7: Redis as the attacker's. A whole fleet runs under the
 * generated ACL (each role logged in as its own user), and the attacker holds
 * one role's credentials — the dispatcher's, or a worker's.
 */

const REPLAY_TOOLS = join(ROOT, 'test', 'fixtures', 'replay-tools.ts');
const prefix = `atk${randomBytes(4).toString('hex')}`;
const keys = fleetKeys(prefix);
const WRITERS = ['dispatcher', 'worker-platform', 'worker-embedded', 'worker-host'] as const;
/** Each writer role's inbox (the lane its entries are filed under; the dispatcher's own is `dispatcher`). */
const inboxOf = (role: (typeof WRITERS)[number]): string => keys.auditInbox(role === 'dispatcher' ? 'dispatcher' : role.replace(/^worker-/, ''));

/** The replay tools' run counters and gates (test/fixtures/replay-tools.ts; importing it would open its connections here). */
const replayKeys = {
  runs: (callId: string) => `${prefix}:test:runs:{${callId}}`,
  release: (callId: string) => `${prefix}:test:release:{${callId}}`,
};

let acl: AclRedis;
let root: Redis;
const fleet = new TestFleet({ prefix });
let dispatcher: FleetProcess & { url: string };
let workers: FleetProcess[] = [];
const tests = new Redis(redisUrl(), { maxRetriesPerRequest: 1 });

beforeAll(async () => {
  acl = await AclRedis.start({ prefix });
  root = acl.connect('testroot');
  const shared = { FORGE_TEST_REDIS_URL: redisUrl() };
  dispatcher = await fleet.dispatcher({ ...shared, REDIS_URL: acl.url('dispatcher'), FORGE_AUDIT_REDIS_URL: acl.url('audit') });
  workers = await Promise.all([
    fleet.worker({ tier: 'platform', concurrency: 256, env: { ...shared, REDIS_URL: acl.url('worker-platform') } }),
    fleet.worker({ tier: 'host', tools: REPLAY_TOOLS, concurrency: 8, env: { ...shared, REDIS_URL: acl.url('worker-host') } }),
  ]);
}, 60_000);

afterAll(async () => {
  await fleet.stopAll();
  tests.disconnect();
  await acl.stop();
});

/** The stream's entries, read as the operator. */
async function auditEntries(): Promise<Array<{ id: string; kind: string; writer: string | undefined; entry: Record<string, unknown> }>> {
  const raw = await root.xrange(keys.audit, '-', '+');
  return raw.map(([id, fields]) => {
    const f = new Map<string, string>();
    for (let i = 0; i + 1 < fields.length; i += 2) f.set(fields[i]!, fields[i + 1]!);
    return { id, kind: f.get('kind') ?? '', writer: f.get('writer'), entry: JSON.parse(f.get('entry') ?? '{}') as Record<string, unknown> };
  });
}

describe('item 7: a fleet under its own ACL loses no audit entry', () => {
  it('files the dispatcher’s decision and the worker’s outcome of every one of 2,000 calls made 256 at a time', async () => {
    const client = new FleetClient({ url: dispatcher.url, connections: 32 });
    const ids: string[] = Array.from({ length: 2000 }, () => randomUUID());
    let next = 0;
    const lane = async (): Promise<void> => {
      while (next < ids.length) {
        const id = ids[next++]!;
        const result = await client.call('echo', { n: id }, { id });
        expect(result.isError).toBe(false);
      }
    };
    await Promise.all(Array.from({ length: 256 }, lane));
    const wanted = new Set(ids);
    const count = async (): Promise<{ decisions: number; outcomes: number }> => {
      let decisions = 0;
      let outcomes = 0;
      for (const e of await auditEntries()) {
        if (e.kind !== 'audit' || !wanted.has(String(e.entry['callId']))) continue;
        if (e.writer === 'dispatcher') decisions++;
        else if (e.writer === 'platform') outcomes++;
      }
      return { decisions, outcomes };
    };
    await until('a decision and an outcome audited for each of the 2,000 calls', async () => {
      const c = await count();
      if (c.decisions !== ids.length || c.outcomes !== ids.length) throw new Error(`audit entries of the 2,000 calls: ${JSON.stringify(c)}`);
      return true;
    }, { timeoutMs: 30_000 });
    for (const p of [dispatcher, ...workers]) expect(p.output()).not.toMatch(/could not be written|could not audit|could not file|NOPERM/);
  }, 180_000);
});

describe('item 6: the audit stream is append-only for every fleet role', () => {
  /** Every command Redis flags as a write, with a well-formed argument list whose every key is `key`. */
  async function writeCommands(): Promise<Array<{ name: string; args: (key: string) => string[] }>> {
    const info = (await root.call('COMMAND')) as unknown[];
    const out: Array<{ name: string; args: (key: string) => string[] }> = [];
    for (const row of info) {
      const [name, arity, flags] = row as [string, number, string[]];
      if (!flags.includes('write') || name.includes('|')) continue;
      const n = Math.abs(arity) - 1;
      // Commands whose keys follow a count: the count must be a number or Redis finds no key to check.
      const counted: Record<string, (key: string) => string[]> = {
        eval: (k) => ["return redis.call('DEL', KEYS[1])", '1', k],
        evalsha: (k) => ['0000000000000000000000000000000000000000', '1', k],
        fcall: (k) => ['f', '1', k],
        lmpop: (k) => ['1', k, 'LEFT'],
        blmpop: (k) => ['0', '1', k, 'LEFT'],
        zmpop: (k) => ['1', k, 'MIN'],
        bzmpop: (k) => ['0', '1', k, 'MIN'],
        zunionstore: (k) => [k, '1', k],
        zinterstore: (k) => [k, '1', k],
        zdiffstore: (k) => [k, '1', k],
        migrate: (k) => ['127.0.0.1', '1', k, '0', '1'],
        xreadgroup: (k) => ['GROUP', 'g', 'c', 'STREAMS', k, '>'],
      };
      out.push({ name, args: counted[name] ?? ((k) => Array.from({ length: Math.max(1, n) }, () => k)) });
    }
    return out;
  }

  it('refuses each write command, on the stream and on every inbox, to every role but the one append each role has', async () => {
    const commands = await writeCommands();
    expect(commands.length).toBeGreaterThan(60);
    const targets = [keys.audit, ...WRITERS.map(inboxOf)];
    const allowed: string[] = [];
    for (const role of WRITERS) {
      for (const key of targets) {
        for (const { name, args } of commands) {
          const answer = String(await root.call('ACL', 'DRYRUN', acl.user(role), name, ...args(key)).catch((e: unknown) => (e as Error).message));
          if (answer === 'OK') allowed.push(`${role} ${name} ${key}`);
        }
      }
    }
    // A writer appends to its own inbox, nothing else: no trim, delete, expiry, rename, overwrite, or append elsewhere.
    expect(allowed.sort()).toEqual(WRITERS.map((role) => `${role} rpush ${inboxOf(role)}`).sort());
  });

  it('keeps every entry when each role sends the destructive commands for real', async () => {
    await until('an audit entry', async () => (await root.xlen(keys.audit)) > 0, { timeoutMs: 10_000 });
    const before = await root.xlen(keys.audit);
    for (const role of WRITERS) {
      const r = acl.connect(role);
      const attempts: Array<Promise<unknown>> = [
        r.del(keys.audit),
        r.unlink(keys.audit),
        r.xtrim(keys.audit, 'MAXLEN', 0),
        r.call('XADD', keys.audit, 'MAXLEN', '0', '*', 'kind', 'audit', 'entry', '{}'),
        r.call('XADD', keys.audit, 'MINID', '9999999999999', '*', 'kind', 'audit', 'entry', '{}'),
        r.pexpire(keys.audit, 1),
        r.expire(keys.audit, 1),
        r.rename(keys.audit, `${keys.audit}x`),
        r.set(keys.audit, 'gone'),
        r.eval("return redis.call('DEL', KEYS[1])", 1, keys.audit),
        r.eval(`return redis.call('DEL', '${keys.audit}')`, 0),
        r.xdel(keys.audit, '0-1'),
        ...WRITERS.map((w) => r.ltrim(inboxOf(w), 1, 0)),
        ...WRITERS.map((w) => r.del(inboxOf(w))),
        ...WRITERS.filter((w) => w !== role).map((w) => r.rpush(inboxOf(w), `audit\n{"forged":"by ${role}"}`)),
      ];
      const outcomes = await Promise.allSettled(attempts);
      const passed = outcomes.map((o, i) => ({ o, i })).filter(({ o }) => o.status === 'fulfilled');
      expect(passed.map(({ i }) => i), `${role}: commands that went through`).toEqual([]);
    }
    expect(await root.type(keys.audit)).toBe('stream');
    expect(await root.xlen(keys.audit)).toBeGreaterThanOrEqual(before);
    expect(await root.pttl(keys.audit)).toBe(-1);
  });

  it('files an entry under the role that wrote it: a worker cannot write as the dispatcher', async () => {
    const worker = acl.connect('worker-platform');
    const marker = randomUUID();
    await worker.rpush(inboxOf('worker-platform'), `audit\n${JSON.stringify({ at: new Date().toISOString(), callId: marker, decision: 'approved', tool: 'echo' })}`);
    await until('the pushed entry in the stream', async () => (await auditEntries()).some((e) => e.entry['callId'] === marker), { timeoutMs: 10_000 });
    const filed = (await auditEntries()).filter((e) => e.entry['callId'] === marker);
    expect(filed.map((e) => e.writer)).toEqual(['platform']);
  });
});

describe('item 5: a genuine call cannot be replayed with the dispatcher’s Redis user', () => {
  /** Starts a gated Host call and reads its job as the dispatcher's user while it runs: the captured envelope. */
  async function capture(tool: 'host_gate' | 'host_gate_retryable', expireAfterMs?: number): Promise<{ id: string; job: { name: string; data: unknown; queue: string }; done: Promise<unknown> }> {
    const token = await fleet.token({ subject: 'replayed-agent', grants: ['host_gate', 'host_gate_retryable'] });
    const client = new FleetClient({ url: dispatcher.url, token, batch: false });
    const id = randomUUID();
    const done = client.call(tool, {}, { id, ...(expireAfterMs === undefined ? {} : { expireAfterMs }) });
    await until(`${tool} started`, async () => Number(await tests.get(replayKeys.runs(id))) === 1, { timeoutMs: 15_000 });
    const attacker = acl.connect('dispatcher');
    const packs = await root.hkeys(keys.catalogPacks('host'));
    for (const pack of packs) {
      const queue = packQueueName(`{${prefix}.host}`, pack);
      for (const jobId of await attacker.lrange(`${prefix}:${queue}:active`, 0, -1)) {
        const h = await attacker.hgetall(`${prefix}:${queue}:${jobId}`);
        const data = JSON.parse(h['data'] ?? 'null') as unknown;
        if (callsOfJob(data).some((e) => e.call.id === id)) return { id, job: { name: h['name'] ?? tool, data, queue }, done };
      }
    }
    throw new Error(`no active job carries call ${id}`);
  }

  /** What the attacker does: the call's record back to `queued`, the captured job added again. */
  async function replay(id: string, job: { name: string; data: unknown; queue: string }): Promise<void> {
    const attacker = acl.connect('dispatcher');
    await attacker.hset(keys.call('host', id), 'status', 'queued');
    const queue = new Queue(job.queue, { connection: attacker, prefix });
    await queue.add(job.name, job.data, { jobId: `replay-${randomUUID()}` });
    await queue.close();
    await tests.rpush(replayKeys.release(id), '1');
    // One replay at a time, as the attack went: the next once a worker has dealt with this one.
    await until('the replayed job dealt with', async () => ['completed', 'failed', 'cancelled'].includes((await root.hget(keys.call('host', id), 'status')) ?? ''), { timeoutMs: 15_000 });
  }

  it('runs a non-retryable call once however often its job is replayed', async () => {
    const { id, job, done } = await capture('host_gate');
    await tests.rpush(replayKeys.release(id), '1');
    expect(await done).toMatchObject({ isError: false, structuredContent: { runs: 1 } });
    for (let i = 0; i < 4; i++) await replay(id, job);
    // Each replay is refused and audited as one: wait for the four refusals, then count the runs.
    await until('four replays refused', async () => {
      const refused = (await auditEntries()).filter((e) => e.entry['callId'] === id && e.entry['errorCategory'] === 'forged_call').length;
      if (refused < 4) throw new Error(`${refused} replays of ${id} refused; runs ${await tests.get(replayKeys.runs(id))}`);
      return true;
    }, { timeoutMs: 20_000 });
    expect(Number(await tests.get(replayKeys.runs(id)))).toBe(1);
  }, 60_000);

  it('runs a retryable call no more often than its retry budget allows', async () => {
    const { id, job, done } = await capture('host_gate_retryable');
    await tests.rpush(replayKeys.release(id), '1');
    await done;
    for (let i = 0; i < 6; i++) await replay(id, job);
    await until('the replays beyond the retry budget refused', async () => {
      const refused = (await auditEntries()).filter((e) => e.entry['callId'] === id && e.entry['errorCategory'] === 'forged_call').length;
      if (refused < 6 - 2) throw new Error(`${refused} replays of ${id} refused; runs ${await tests.get(replayKeys.runs(id))}`);
      return true;
    }, { timeoutMs: 20_000 });
    // The test fleet's FORGE_RETRY_ATTEMPTS default (3): the first run and at most two more, never seven.
    expect(Number(await tests.get(replayKeys.runs(id)))).toBeLessThanOrEqual(3);
  }, 60_000);

  it('signs a call with a deadline for no longer than its deadline', async () => {
    const { id, job, done } = await capture('host_gate', 60_000);
    await tests.rpush(replayKeys.release(id), '1');
    await done;
    const [envelope] = callsOfJob(job.data) as [CallEnvelope];
    expect(envelope.deadline).toBeDefined();
    expect(envelope.sig?.validUntil).toBeLessThanOrEqual(envelope.deadline!);
  }, 60_000);

  it('leaves the dispatcher’s user no access to the executions the workers record', async () => {
    const attacker = acl.connect('dispatcher');
    const ledger = keys.executions('host', 'x', 'm');
    await expect(attacker.del(ledger)).rejects.toThrow(/NOPERM/);
    await expect(attacker.hset(ledger, 'a', '1')).rejects.toThrow(/NOPERM/);
    await expect(attacker.hgetall(ledger)).rejects.toThrow(/NOPERM/);
  });
});
