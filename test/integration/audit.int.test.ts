import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { TestFleet } from '../fixtures/fleet.js';

/**
 * The audit stream over HTTP: every admission decision of a real dispatcher
 * (approved, awaiting approval, each rejection category, unauthenticated
 * requests, listings), read back through `GET /v1/audit` by an admin with
 * filters; and the argument limits, refused with typed errors and audited.
 */
describe('GET /v1/audit and the argument limits', () => {
  const fleet = new TestFleet();
  let url: string;
  let denyUrl: string;
  let admin: string;
  let agent: string;
  let researcher: string;
  const subject = `agent-${randomUUID().slice(0, 8)}`;

  async function send(base: string, method: string, path: string, token: string | undefined, body?: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
    const response = await fetch(`${base}${path}`, {
      method,
      headers: { ...(token === undefined ? {} : { authorization: `Bearer ${token}` }), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
    });
    return { status: response.status, body: (await response.json()) as Record<string, unknown> };
  }
  const call = (token: string, body: unknown, base = url) => send(base, 'POST', '/v1/calls?wait=10000', token, body);
  async function audit(query: string, token = admin): Promise<Array<Record<string, unknown>>> {
    const answer = await send(url, 'GET', `/v1/audit?${query}`, token);
    expect(answer.status, JSON.stringify(answer.body)).toBe(200);
    return answer.body['entries'] as Array<Record<string, unknown>>;
  }
  /** Approvals are written without making the call wait: read until the entry shows. */
  const eventually = <T>(read: () => Promise<T>) => vi.waitFor(read, { timeout: 5000, interval: 25 });

  beforeAll(async () => {
    await fleet.worker({ tier: 'platform' });
    const common = { FORGE_DEV_MODE: '0', FORGE_SCOPES: JSON.stringify({ research: ['echo'] }), FORGE_MAX_ARGUMENT_BYTES: '2048', FORGE_MAX_JSON_DEPTH: '8' };
    [url, denyUrl] = await Promise.all([fleet.dispatcher(common).then((d) => d.url), fleet.dispatcher({ ...common, FORGE_APPROVAL: 'deny' }).then((d) => d.url)]);
    [admin, agent, researcher] = await Promise.all([
      fleet.token({ subject: 'auditor', role: 'admin' }),
      fleet.token({ subject }),
      fleet.token({ subject: `${subject}-r`, task: 'research' }),
    ]);
  });

  afterAll(() => fleet.stopAll());

  it('records an approved call with caller, role, tool, tier and the scope at listing and at dispatch', async () => {
    expect((await send(url, 'GET', '/v1/tools', researcher)).status).toBe(200);
    const id = `a-${randomUUID()}`;
    expect((await call(researcher, { id, name: 'echo', arguments: { x: 1 } })).body).toMatchObject({ status: 'completed' });
    // The dispatcher's decision and the worker's outcome.
    const entries = await eventually(async () => {
      const found = await audit(`callId=${id}`);
      expect(found).toHaveLength(2);
      return found;
    });
    const approved = entries.find((e) => e['decision'] === 'approved');
    expect(approved).toMatchObject({ callId: id, tool: 'echo', tier: 'platform', caller: `${subject}-r`, role: 'agent', scopeAtListing: 'research', scopeAtDispatch: 'research' });
    expect(entries.find((e) => e['decision'] === 'completed')).toMatchObject({ callId: id, tool: 'echo', tier: 'platform', caller: `${subject}-r` });
    expect(approved?.['id']).toMatch(/^\d+-\d+$/);
    expect(await audit(`caller=${subject}-r&decision=listed`)).toEqual([expect.objectContaining({ decision: 'listed', scopeAtDispatch: 'research' })]);
  });

  it('records every rejection with its category, and waiting calls', async () => {
    const outOfScope = `oos-${randomUUID()}`;
    expect(await call(researcher, { id: outOfScope, name: 'count', arguments: { n: 1 } })).toMatchObject({ status: 403, body: { error: { code: 'OUT_OF_SCOPE' } } });
    const schema = `schema-${randomUUID()}`;
    expect(await call(agent, { id: schema, name: 'count', arguments: { n: 'one' } })).toMatchObject({ status: 422, body: { error: { code: 'SCHEMA_VALIDATION' } } });
    const denied = `denied-${randomUUID()}`;
    expect(await call(agent, { id: denied, name: 'echo', arguments: {} }, denyUrl)).toMatchObject({ status: 403, body: { error: { code: 'APPROVAL_DENIED' } } });
    const missing = `missing-${randomUUID()}`;
    expect(await call(agent, { id: missing, name: 'no_such_tool', arguments: {} })).toMatchObject({ status: 404, body: { error: { code: 'TOOL_NOT_FOUND' } } });
    const waiting = `wait-${randomUUID()}`;
    expect(await call(agent, { id: waiting, name: 'confirm_first', arguments: {} })).toMatchObject({ status: 202, body: { status: 'awaiting_approval' } });

    // Rejections are written before the caller is answered.
    expect(await audit(`callId=${outOfScope}`)).toEqual([
      expect.objectContaining({ decision: 'rejected', category: 'out_of_scope', errorCategory: 'out_of_scope', code: 'OUT_OF_SCOPE', scopeAtDispatch: 'research', caller: `${subject}-r` }),
    ]);
    expect(await audit(`callId=${schema}`)).toEqual([expect.objectContaining({ decision: 'rejected', category: 'schema', code: 'SCHEMA_VALIDATION', scopeAtDispatch: 'default' })]);
    const deniedEntries = await audit(`callId=${denied}`);
    expect(deniedEntries).toEqual([expect.objectContaining({ decision: 'rejected', category: 'denied', code: 'APPROVAL_DENIED' })]);
    expect(deniedEntries[0]?.['reason']).toMatch(/FORGE_APPROVAL=deny/);
    expect(await audit(`callId=${missing}`)).toEqual([expect.objectContaining({ decision: 'rejected', category: 'not_found' })]);
    await eventually(async () => expect(await audit(`callId=${waiting}`)).toEqual([expect.objectContaining({ decision: 'awaiting_approval', tool: 'confirm_first' })]));

    // Filters combine; newest first.
    const mine = await audit(`caller=${subject}&decision=rejected`);
    expect(mine.map((e) => e['callId'])).toEqual([missing, denied, schema]);
    expect(await audit(`caller=${subject}&category=schema`)).toHaveLength(1);
    expect(await audit(`caller=${subject}&tool=count`)).toHaveLength(1);
    expect(await audit(`caller=${subject}&decision=rejected&limit=1`)).toHaveLength(1);
  }, 90_000);

  it('records unauthenticated requests and refuses readers that are not admins (403 FORBIDDEN)', async () => {
    const since = Date.now();
    expect(await send(url, 'GET', '/v1/tools', 'not-a-token')).toMatchObject({ status: 401, body: { error: { code: 'UNAUTHENTICATED' } } });
    await eventually(async () => {
      expect(await audit(`category=unauthenticated&since=${since}`)).toEqual([expect.objectContaining({ decision: 'rejected', route: 'GET /v1/tools', code: 'UNAUTHENTICATED' })]);
    });
    expect(await send(url, 'GET', '/v1/audit', agent)).toMatchObject({ status: 403, body: { error: { code: 'FORBIDDEN' } } });
    expect(await send(url, 'GET', '/v1/audit', undefined)).toMatchObject({ status: 401, body: { error: { code: 'UNAUTHENTICATED' } } });
    await eventually(async () => expect(await audit(`category=forbidden&since=${since}`)).toEqual([expect.objectContaining({ route: 'GET /v1/audit', role: 'agent' })]));
  });

  it('filters by time (ISO or epoch ms) and validates its query', async () => {
    const future = new Date(Date.now() + 3_600_000).toISOString();
    expect(await audit(`since=${encodeURIComponent(future)}`)).toEqual([]);
    expect((await audit(`until=${Date.now()}&limit=5`)).length).toBe(5);
    for (const query of ['limit=0', 'limit=1001', 'decision=maybe', 'category=x', 'since=yesterday', 'since=2000&until=1000', 'extra=1']) {
      expect(await send(url, 'GET', `/v1/audit?${query}`, admin), query).toMatchObject({ status: 400, body: { error: { code: 'BAD_REQUEST' } } });
    }
  });

  it('refuses arguments over the size and depth limits and proto keys, with typed errors, audited', async () => {
    const big = `big-${randomUUID()}`;
    const tooBig = await call(agent, { id: big, name: 'echo', arguments: { s: 'x'.repeat(4096) } });
    expect(tooBig).toMatchObject({ status: 413, body: { error: { code: 'PAYLOAD_TOO_LARGE', limitBytes: 2048 } } });
    expect(JSON.stringify(tooBig.body)).toMatch(/FORGE_MAX_ARGUMENT_BYTES/);
    let deep: unknown = 1;
    for (let i = 0; i < 10; i++) deep = { d: deep };
    const tooDeep = await call(agent, { name: 'echo', arguments: { deep } });
    expect(tooDeep).toMatchObject({ status: 400, body: { error: { code: 'BAD_REQUEST' } } });
    expect(JSON.stringify(tooDeep.body)).toMatch(/deeper than 8 levels.*FORGE_MAX_JSON_DEPTH/);
    // Raw bodies, so the keys reach the dispatcher exactly as written.
    for (const args of ['{"__proto__":{"polluted":true}}', '{"a":{"constructor":{"prototype":{"polluted":true}}}}', '{"a":[{"constructor":1}]}', '{"prototype":{}}']) {
      const answer = await call(agent, `{"name":"echo","arguments":${args}}`);
      expect(answer, args).toMatchObject({ status: 400, body: { error: { code: 'BAD_REQUEST' } } });
    }
    // A batch answers each oversized call on its own line.
    const batch = await fetch(`${url}/v1/calls/batch?wait=10000`, {
      method: 'POST',
      headers: { authorization: `Bearer ${agent}`, 'content-type': 'application/json' },
      body: JSON.stringify({ calls: [{ name: 'echo', arguments: { s: 'x'.repeat(4096) } }, { name: 'echo', arguments: { ok: true } }] }),
    });
    const lines = (await batch.text()).trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>).sort((a, b) => Number(a['index']) - Number(b['index']));
    expect(lines).toMatchObject([{ index: 0, error: { code: 'PAYLOAD_TOO_LARGE' } }, { index: 1, status: 'completed' }]);
    expect(await audit(`callId=${big}`)).toEqual([expect.objectContaining({ decision: 'rejected', category: 'bad_request', code: 'PAYLOAD_TOO_LARGE' })]);
    // Nothing leaked into the dispatcher's objects: a normal call still answers normally.
    expect((await call(agent, { name: 'echo', arguments: { after: true } })).body).toMatchObject({ status: 'completed', result: { structuredContent: { echo: { after: true } } } });
  });
});
