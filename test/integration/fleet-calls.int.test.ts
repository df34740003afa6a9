import { randomUUID } from 'node:crypto';
import { FleetClient } from '@forge-fleet/client';
import { type FleetError, generateTokenKeys, isFleetError, mintToken } from '@forge-fleet/shared';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FleetProcess, TestFleet } from '../fixtures/fleet.js';
import { redisUrl } from '../fixtures/redis.js';
import { until } from '../fixtures/wait.js';

async function refusal(promise: Promise<unknown>): Promise<FleetError> {
  try {
    await promise;
  } catch (error) {
    if (isFleetError(error)) return error;
    throw error;
  }
  throw new Error('expected the call to be refused');
}

describe('a fleet: one dispatcher, workers of every tier', () => {
  const fleet = new TestFleet();
  let dispatcher: FleetProcess & { url: string };
  let client: FleetClient;
  let token: string;
  let redis: Redis;
  const auth = () => ({ authorization: `Bearer ${token}` });
  const runs = (id: string) => redis.get(`${fleet.prefix}:test:runs:{${id}}`).then((v) => Number(v ?? 0));
  const started = async (id: string) => (await redis.blpop(`${fleet.prefix}:test:started:{${id}}`, 10))?.[1];
  /**
   * The reason the handler of call `id` noted when its signal fired. A call ends at its deadline or cancel without
   * waiting for its handler, so the note may land a moment after the call's answer.
   */
  const signalSeen = (id: string) => until('the handler to see its signal', async () => (await redis.get(`${fleet.prefix}:test:aborted:{${id}}`)) ?? undefined);

  beforeAll(async () => {
    redis = new Redis(redisUrl());
    await Promise.all([fleet.worker({ tier: 'platform' }), fleet.worker({ tier: 'embedded' }), fleet.worker({ tier: 'host' }), fleet.worker({ tier: 'host', pool: 'payments' })]);
    // Production mode: every request needs a token.
    dispatcher = await fleet.dispatcher({
      FORGE_DEV_MODE: '0',
      FORGE_SCOPES: JSON.stringify({ research: ['echo', 'embedded_echo'] }),
      FORGE_BODY_LIMIT_BYTES: String(64 * 1024),
    });
    token = await fleet.token({ subject: 'tests', grants: ['host_echo', 'pool_echo'] });
    client = new FleetClient({ url: dispatcher.url, token });
  });

  afterAll(async () => {
    await client?.close();
    redis?.disconnect();
    await fleet.stopAll();
  });

  it('runs a call through every tier and host pool', async () => {
    const results = await Promise.all(['echo', 'embedded_echo', 'host_echo', 'pool_echo'].map((name) => client.call(name, { hello: name })));
    for (const [i, name] of ['echo', 'embedded_echo', 'host_echo', 'pool_echo'].entries()) {
      expect(results[i]).toMatchObject({ name, isError: false, structuredContent: { echo: { hello: name } } });
    }
    // Host pools are separate processes: the pool tool ran on another pid than the default host tool.
    expect(results[2]?.structuredContent?.pid).not.toBe(results[3]?.structuredContent?.pid);
  });

  it('lists the live tools, filtered by the task scope', async () => {
    const all = (await client.tools()).map((t) => t.name);
    expect(all).toEqual(expect.arrayContaining(['echo', 'embedded_echo', 'host_echo', 'pool_echo', 'count']));
    const research = new FleetClient({ url: dispatcher.url, token: await fleet.token({ subject: 'researcher', task: 'research' }) });
    try {
      expect((await research.tools()).map((t) => t.name)).toEqual(['echo', 'embedded_echo']);
    } finally {
      await research.close();
    }
  });

  it('treats a repeated id as the same call: it runs once', async () => {
    const id = `idem-${randomUUID()}`;
    const [a, b] = await Promise.all([client.call('count', { n: 1 }, { id }), client.call('count', { n: 1 }, { id })]);
    const c = await client.call('count', { n: 1 }, { id });
    expect(a).toEqual(b);
    expect(c).toEqual(a);
    expect(await runs(id)).toBe(1);
  });

  it('answers every resubmission of an id made while the first is in flight, each call run once', async () => {
    // Record and job leave in one write, so the first submission's call can end before its twin has read the record:
    // the twin must still get the result.
    const ids = Array.from({ length: 40 }, () => `twin-${randomUUID()}`);
    const answers = await Promise.all(ids.flatMap((id) => [client.call('count', { n: 2 }, { id, timeoutMs: 10_000 }), client.call('count', { n: 2 }, { id, timeoutMs: 10_000 })]));
    for (let i = 0; i < ids.length; i++) expect(answers[2 * i]).toEqual(answers[2 * i + 1]);
    expect(await Promise.all(ids.map(runs))).toEqual(ids.map(() => 1));
  });

  it('accepts call ids with colons (BullMQ job ids may not have them; ours are not job ids)', async () => {
    const id = `agent:7:step:${randomUUID()}`;
    expect(await client.call('count', { n: 1 }, { id })).toMatchObject({ toolCallId: id, isError: false });
  });

  it('aborts a tool at its timeoutMs and ends the call with EXECUTION_TIMEOUT', async () => {
    const id = `timeout-${randomUUID()}`;
    const result = await client.call('slow', {}, { id });
    expect(result).toMatchObject({ isError: true, error: { code: 'EXECUTION_TIMEOUT' } });
    expect(await signalSeen(id)).toBe('timeout');
  });

  it('cancels a running call: the handler sees its signal and the call ends cancelled', async () => {
    const id = `cancel-${randomUUID()}`;
    const view = await client.submit('block', {}, { id });
    expect(view.status).toBe('queued');
    await started(id);
    const cancelled = await client.cancel(id);
    expect(cancelled.status).toBe('cancelled');
    expect(cancelled.result?.error?.code).toBe('CANCELLED');
    expect(await signalSeen(id)).toContain('cancelled');
    expect((await client.get(id)).status).toBe('cancelled');
  });

  it('runs a retryable tool again after transient failures', async () => {
    const id = `flaky-${randomUUID()}`;
    const result = await client.call('flaky', {}, { id });
    expect(result).toMatchObject({ isError: false, structuredContent: { runs: 3 } });
  });

  it('holds a call to a tool that requires confirmation; a client that will not wait for a person hears so at once', async () => {
    const id = `confirm-${randomUUID()}`;
    const view = await client.submit('confirm_first', {}, { id, waitMs: 300 });
    expect(view).toMatchObject({ id, status: 'awaiting_approval', reason: expect.stringContaining('confirm') as string });
    await expect(client.call('confirm_first', {}, { id, timeoutMs: 10_000, waitForApproval: false })).rejects.toMatchObject({ code: 'APPROVAL_PENDING', details: { callId: id } });
    expect((await client.get(id)).status).toBe('awaiting_approval');
  }, 90_000);

  it('aborting a client call stops the wait and cancels the call in the fleet', async () => {
    const id = `abort-${randomUUID()}`;
    const controller = new AbortController();
    // The submission itself is still waiting (wait = timeout) when the abort comes.
    const pending = client.call('block', {}, { id, signal: controller.signal, timeoutMs: 20_000 });
    await redis.blpop(`${fleet.prefix}:test:started:{${id}}`, 10);
    controller.abort();
    await expect(pending).rejects.toThrow();
    expect((await client.get(id, { waitMs: 5000 })).status).toBe('cancelled');
    expect(await signalSeen(id)).toContain('cancelled');
  });

  it('refuses an unknown tool with TOOL_NOT_FOUND (404)', async () => {
    const error = await refusal(client.call('no_such_tool', {}));
    expect(error.code).toBe('TOOL_NOT_FOUND');
    expect(error.httpStatus).toBe(404);
  });

  it('refuses bad arguments with SCHEMA_VALIDATION (422) and the path', async () => {
    const error = await refusal(client.call('count', { n: 'one' }));
    expect(error.code).toBe('SCHEMA_VALIDATION');
    expect(error.details.path).toBe('/n');
  });

  it('denies a host tool to a caller without a grant (APPROVAL_DENIED, 403)', async () => {
    const anonymous = new FleetClient({ url: dispatcher.url, token: await fleet.token({ subject: 'ungranted' }) });
    try {
      const error = await refusal(anonymous.call('host_echo', {}));
      expect(error.code).toBe('APPROVAL_DENIED');
    } finally {
      await anonymous.close();
    }
  });

  it('refuses an out-of-scope call (OUT_OF_SCOPE, 403) and audits it', async () => {
    const research = new FleetClient({ url: dispatcher.url, token: await fleet.token({ subject: 'researcher', task: 'research', grants: ['host_echo'] }) });
    try {
      const error = await refusal(research.call('host_echo', {}, { id: 'oos-1' }));
      expect(error.code).toBe('OUT_OF_SCOPE');
      expect(error.details.scope).toBe('research');
    } finally {
      await research.close();
    }
    // Written before the answer; filed into the stream by the dispatcher's audit keeper a moment later.
    const entry = await until('the audit entry of the out-of-scope call', async () => {
      const entries = await redis.xrange(`${fleet.prefix}:{${fleet.prefix}.audit}`, '-', '+');
      // Audit entries only: the out-of-scope call's risk signal shares the stream (kind `risk`).
      return entries.filter(([, fields]) => fields[1] === 'audit').map(([, fields]) => JSON.parse(fields[3] ?? '{}') as Record<string, unknown>).find((e) => e['callId'] === 'oos-1');
    });
    expect(entry).toMatchObject({ callId: 'oos-1', tool: 'host_echo', errorCategory: 'out_of_scope', scopeAtDispatch: 'research' });
  });

  it('refuses missing, foreign, expired and unknown-task tokens (UNAUTHENTICATED, 401) and an approver calling tools (FORBIDDEN, 403)', async () => {
    const tokens = {
      none: undefined,
      foreign: await mintToken(generateTokenKeys().privateKeyPem, { subject: 'intruder' }),
      expired: await fleet.token({ subject: 'late', expiresInSeconds: -5 }),
      otherFleet: await fleet.token({ subject: 'a', audience: 'another-fleet' }),
      unknownTask: await fleet.token({ subject: 'a', task: 'nope' }),
    };
    for (const [what, t] of Object.entries(tokens)) {
      const c = new FleetClient({ url: dispatcher.url, ...(t === undefined ? {} : { token: t }) });
      try {
        const error = await refusal(c.call('echo'));
        expect({ what, code: error.code, status: error.httpStatus }).toEqual({ what, code: 'UNAUTHENTICATED', status: 401 });
        expect((await refusal(c.tools())).code).toBe('UNAUTHENTICATED');
      } finally {
        await c.close();
      }
    }
    const approver = new FleetClient({ url: dispatcher.url, token: await fleet.token({ subject: 'person', role: 'approver' }) });
    try {
      const error = await refusal(approver.call('echo'));
      expect([error.code, error.httpStatus]).toEqual(['FORBIDDEN', 403]);
    } finally {
      await approver.close();
    }
  });

  it('shows and cancels a call only for its submitter (or an admin); others get CALL_NOT_FOUND and cannot take its id', async () => {
    const id = `owned-${randomUUID()}`;
    await client.call('echo', { mine: true }, { id });
    const other = new FleetClient({ url: dispatcher.url, token: await fleet.token({ subject: 'someone-else' }) });
    const admin = new FleetClient({ url: dispatcher.url, token: await fleet.token({ subject: 'ops', role: 'admin' }) });
    try {
      expect((await refusal(other.get(id))).code).toBe('CALL_NOT_FOUND');
      expect((await refusal(other.cancel(id))).code).toBe('CALL_NOT_FOUND');
      expect((await refusal(other.call('echo', {}, { id }))).code).toBe('BAD_REQUEST');
      expect((await admin.get(id)).status).toBe('completed');
      expect((await client.get(id)).status).toBe('completed');
    } finally {
      await Promise.all([other.close(), admin.close()]);
    }
  });

  it('runs a speculative call only for a speculatable tool, and never sends one to a person (NOT_SPECULATABLE)', async () => {
    expect(await client.call('guess', {}, { speculative: true })).toMatchObject({ isError: false, structuredContent: { guessed: true } });
    await expect(client.call('echo', { a: 1 }, { speculative: true })).rejects.toMatchObject({ code: 'NOT_SPECULATABLE', httpStatus: 422, message: expect.stringContaining('not flagged speculatable') as string });
    await expect(client.call('confirm_guess', {}, { speculative: true })).rejects.toMatchObject({ code: 'NOT_SPECULATABLE', message: expect.stringContaining('person') as string });
    expect((await client.call('echo', { a: 2 })).isError).toBe(false);
  });

  it('answers CALL_NOT_FOUND for an unknown id', async () => {
    expect((await refusal(client.get('never-submitted'))).code).toBe('CALL_NOT_FOUND');
  });

  it('answers malformed requests with BAD_REQUEST and oversized ones with PAYLOAD_TOO_LARGE, and keeps serving', async () => {
    const post = (body: string) => fetch(`${dispatcher.url}/v1/calls`, { method: 'POST', headers: { 'content-type': 'application/json', ...auth() }, body });
    const notJson = await post('{not json');
    expect(notJson.status).toBe(400);
    expect(((await notJson.json()) as { error: { code: string } }).error.code).toBe('BAD_REQUEST');
    const wrongShape = await post(JSON.stringify({ name: 'echo', arguments: [], extra: 1 }));
    expect(wrongShape.status).toBe(400);
    const huge = await post(JSON.stringify({ name: 'echo', arguments: { blob: 'x'.repeat(100 * 1024) } }));
    expect(huge.status).toBe(413);
    expect(((await huge.json()) as { error: { code: string } }).error.code).toBe('PAYLOAD_TOO_LARGE');
    const badWait = await fetch(`${dispatcher.url}/v1/calls/x?wait=999999`, { headers: auth() });
    expect(badWait.status).toBe(400);
    const noRoute = await fetch(`${dispatcher.url}/v2/nothing`);
    expect(((await noRoute.json()) as { error: { code: string } }).error.code).toBe('ROUTE_NOT_FOUND');
    expect((await client.call('echo', { still: 'alive' })).isError).toBe(false);
  });

  it('answers a batch call by call: errors stay per call and a slow call holds back no other', async () => {
    const slowId = `batch-slow-${randomUUID()}`;
    const response = await fetch(`${dispatcher.url}/v1/calls/batch?wait=10000`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...auth() },
      body: JSON.stringify({
        calls: [{ id: slowId, name: 'gated', arguments: {} }, { name: 'echo', arguments: { a: 1 } }, { name: 'nope', arguments: {} }, { name: 'count', arguments: { n: 'x' } }, 'garbage'],
      }),
    });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toContain('application/x-ndjson');
    const reader: ReadableStreamDefaultReader<Uint8Array> = response.body!.getReader();
    const decoder = new TextDecoder();
    let text = '';
    const lines = (): Record<string, unknown>[] =>
      text
        .split('\n')
        .filter((l) => l.trim() !== '')
        .map((l) => JSON.parse(l) as Record<string, unknown>);
    /** Reads the answer until `enough` holds of its lines or it ends (a line still arriving in parts reads as not yet). */
    const readUntil = (what: string, enough: () => boolean) =>
      until(
        what,
        async () => {
          const { value, done } = await reader.read();
          if (value !== undefined) text += decoder.decode(value, { stream: true });
          return done || enough();
        },
        { intervalMs: 0 },
      );
    await readUntil('four answer lines of the batch', () => lines().length >= 4);
    // Four answers arrived while the gated call still runs.
    const early = new Map(lines().map((l) => [l.index, l]));
    expect(early.get(0)).toBeUndefined();
    expect(early.get(1)).toMatchObject({ status: 'completed', result: { structuredContent: { echo: { a: 1 } } } });
    expect(early.get(2)).toMatchObject({ error: { code: 'TOOL_NOT_FOUND' } });
    expect(early.get(3)).toMatchObject({ error: { code: 'SCHEMA_VALIDATION', path: '/n' } });
    expect(early.get(4)).toMatchObject({ error: { code: 'BAD_REQUEST' } });
    await redis.lpush(`${fleet.prefix}:test:release:{${slowId}}`, 'go');
    await readUntil('the end of the batch answer', () => false);
    expect(lines().find((l) => l.index === 0)).toMatchObject({ id: slowId, status: 'completed' });
  });

  it('survives a client hanging up in the middle of a batch answer; the calls still end and stay readable', async () => {
    const slowId = `batch-hangup-${randomUUID()}`;
    const controller = new AbortController();
    const response = await fetch(`${dispatcher.url}/v1/calls/batch?wait=10000`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...auth() },
      body: JSON.stringify({ calls: [{ id: slowId, name: 'gated', arguments: {} }, { name: 'echo', arguments: {} }] }),
      signal: controller.signal,
    });
    const reader: ReadableStreamDefaultReader<Uint8Array> = response.body!.getReader();
    await reader.read(); // the echo line
    controller.abort();
    await redis.lpush(`${fleet.prefix}:test:release:{${slowId}}`, 'go');
    expect(await client.wait(slowId, { timeoutMs: 10_000 })).toMatchObject({ isError: false, structuredContent: { released: true } });
    expect((await fetch(`${dispatcher.url}/healthz`)).status).toBe(200);
    // A hang-up is not a server error.
    expect(dispatcher.output()).not.toContain('"level":50');
  });

  it.each([
    ['on its call stream', true],
    ['as one batch request', false],
  ])('sends the client calls made together %s, and still answers each on its own', async (_how, stream) => {
    const sender = new FleetClient({ url: dispatcher.url, token, stream });
    try {
      const [ok, bad] = await Promise.allSettled([sender.call('echo', { together: true }), sender.call('count', { n: 'x' })]);
      expect(ok).toMatchObject({ status: 'fulfilled', value: { isError: false, structuredContent: { echo: { together: true } } } });
      expect(bad).toMatchObject({ status: 'rejected', reason: { code: 'SCHEMA_VALIDATION' } });
    } finally {
      await sender.close();
    }
  });

  it('answers health and readiness', async () => {
    expect((await fetch(`${dispatcher.url}/healthz`)).status).toBe(200);
    expect(await (await fetch(`${dispatcher.url}/readyz`)).json()).toEqual({ ok: true });
  });
});

describe('a busy single-slot worker: queued calls', () => {
  const fleet = new TestFleet();
  let client: FleetClient;
  let redis: Redis;
  const runs = (id: string) => redis.get(`${fleet.prefix}:test:runs:{${id}}`).then((v) => Number(v ?? 0));

  beforeAll(async () => {
    redis = new Redis(redisUrl());
    await fleet.worker({ tier: 'platform', concurrency: 1 });
    client = new FleetClient({ url: (await fleet.dispatcher()).url });
  });

  afterAll(async () => {
    await client?.close();
    redis?.disconnect();
    await fleet.stopAll();
  });

  /** Occupies the only slot until the returned function cancels the blocker. */
  async function occupy(): Promise<() => Promise<void>> {
    const id = `blocker-${randomUUID()}`;
    await client.submit('block', {}, { id });
    await redis.blpop(`${fleet.prefix}:test:started:{${id}}`, 10);
    return async () => void (await client.cancel(id));
  }

  it('cancels a queued call: it ends cancelled and never runs', async () => {
    const release = await occupy();
    const id = `queued-${randomUUID()}`;
    expect((await client.submit('count', { n: 1 }, { id })).status).toBe('queued');
    const cancelled = await client.cancel(id);
    expect(cancelled).toMatchObject({ status: 'cancelled', result: { isError: true, error: { code: 'CANCELLED' } } });
    await release();
    // The next call through the same single slot runs only after the cancelled job was skipped.
    expect((await client.call('echo', {})).isError).toBe(false);
    expect(await runs(id)).toBe(0);
    expect((await client.get(id)).status).toBe('cancelled');
  });

  it('never executes a call whose deadline passed while it was queued (EXPIRED)', async () => {
    const release = await occupy();
    const id = `deadline-${randomUUID()}`;
    // 1 ms: the deadline has passed long before the slot frees (that takes several round trips).
    expect((await client.submit('count', { n: 1 }, { id, expireAfterMs: 1 })).status).toBe('queued');
    await release();
    // It never ran: FleetClient throws it, as a refusal.
    await expect(client.wait(id, { timeoutMs: 10_000 })).rejects.toMatchObject({ code: 'EXPIRED', httpStatus: 410 });
    expect((await client.get(id)).result).toMatchObject({ isError: true, error: { code: 'EXPIRED' } });
    expect(await runs(id)).toBe(0);
  });
});
