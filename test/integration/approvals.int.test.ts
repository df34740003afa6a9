import { randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FleetClient } from '@forge-fleet/client';
import { type PendingApproval } from '@forge-fleet/shared';
import { fleetKeys } from '@forge-fleet/store';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { TestFleet } from '../fixtures/fleet.js';
import { redisUrl } from '../fixtures/redis.js';
import { until } from '../fixtures/wait.js';

const EVERYTHING = createRequire(import.meta.url).resolve('@modelcontextprotocol/server-everything/dist/index.js');

/**
 * People in the loop, through the running fleet: a call to a tool that needs
 * confirmation waits (nothing enqueued) until an approver decides; the agent
 * waiting on it hears the outcome — result, denial or expiry.
 */
describe('approvals by people', () => {
  const fleet = new TestFleet();
  let agent: FleetClient;
  let approver: FleetClient;
  let redis: Redis;
  const runs = (id: string) => redis.get(`${fleet.prefix}:test:runs:{${id}}`).then((v) => Number(v ?? 0));

  /** The pending entry of a call, once its submission has been recorded. */
  const pending = (id: string): Promise<PendingApproval> => until(`call ${id} to be listed as waiting for approval`, async () => (await approver.approvals()).find((a) => a.id === id));

  beforeAll(async () => {
    redis = new Redis(redisUrl());
    await fleet.worker({ tier: 'platform' });
    const { url } = await fleet.dispatcher({ FORGE_DEV_MODE: '0', FORGE_APPROVAL_DEADLINE_MS: '60000' });
    agent = new FleetClient({ url, token: await fleet.token({ subject: 'agent-1' }) });
    approver = new FleetClient({ url, token: await fleet.token({ subject: 'alice', role: 'approver' }) });
  });

  afterAll(async () => {
    await Promise.all([agent?.close(), approver?.close()]);
    redis?.disconnect();
    await fleet.stopAll();
  });

  it('lists a waiting call with what a person needs to decide, runs it once approved, and the waiting agent gets the result', async () => {
    const id = `approve-${randomUUID()}`;
    const result = agent.call('confirm_echo', { text: 'hello' }, { id, timeoutMs: 20_000 });
    const entry = await pending(id);
    expect(entry).toMatchObject({ id, tool: 'confirm_echo', arguments: { text: 'hello' }, caller: 'agent-1', scope: 'default', reason: expect.stringContaining('confirm') as string });
    expect(entry.deadline).toBeGreaterThan(entry.createdAt);
    expect(await runs(id)).toBe(0); // nothing ran while it waited
    expect(await approver.decide(id, { decision: 'approve' })).toEqual({ id, status: 'queued' });
    expect(await result).toMatchObject({ isError: false, structuredContent: { echo: 'hello', runs: 1 } });
    expect((await approver.approvals()).some((a) => a.id === id)).toBe(false);
  });

  it('refuses an invalid edit (the call keeps waiting), runs a valid one, and audits both argument sets and who decided', async () => {
    const id = `modify-${randomUUID()}`;
    const result = agent.call('confirm_echo', { text: 'original' }, { id, timeoutMs: 20_000 });
    await pending(id);
    const refused = approver.decide(id, { decision: 'modify', arguments: { text: 'x'.repeat(50) } });
    await expect(refused).rejects.toMatchObject({ code: 'SCHEMA_VALIDATION', httpStatus: 422 });
    // The person is told what they can do: the call waits on (not "call again", which is the agent's remedy).
    const said = (await refused.catch((error: unknown) => error as Error)) as Error;
    expect(said.message).toContain('the call keeps waiting for a person, so send another modify, or deny it');
    expect(said.message).not.toContain('call again');
    expect((await pending(id)).arguments).toEqual({ text: 'original' });
    await approver.decide(id, { decision: 'modify', arguments: { text: 'edited' }, reason: 'softer wording' });
    expect(await result).toMatchObject({ isError: false, structuredContent: { echo: 'edited', runs: 1 } });
    const decided = await until(`the audit entry of the edit of ${id}`, async () => {
      const entries = (await redis.xrange(fleetKeys(fleet.prefix).audit, '-', '+')).map(([, f]) => JSON.parse(f[3] ?? '{}') as Record<string, unknown>);
      return entries.find((e) => e['callId'] === id && e['decision'] === 'modified');
    });
    expect(decided).toMatchObject({ decidedBy: 'alice', caller: 'agent-1', arguments: { text: 'original' }, editedArguments: { text: 'edited' }, reason: 'softer wording' });
  });

  it('refuses an edit past the input limits with the answer a submission of those arguments gets; the call keeps waiting and runs as submitted', async () => {
    let deep: Record<string, unknown> = { leaf: true };
    for (let level = 0; level < 40; level++) deep = { a: deep };
    const edits: Record<string, Record<string, unknown>> = {
      'over 256 KiB': { text: 'x'.repeat(300 * 1024) },
      'nested 41 levels': deep,
      'a constructor key': { options: { constructor: 'Object' } },
      'a prototype key': { list: [{ prototype: {} }] },
      // As JSON.parse makes it: an own key, which FleetClient sends as it is.
      'a __proto__ key': JSON.parse('{"a":{"__proto__":{"polluted":true}}}') as Record<string, unknown>,
    };
    const answerTo = (promise: Promise<unknown>) =>
      promise.then(
        () => 'accepted',
        (error: { code?: string; httpStatus?: number; message?: string }) => ({ code: error.code, httpStatus: error.httpStatus, message: error.message }),
      );
    const id = `modify-limits-${randomUUID()}`;
    const result = agent.call('confirm_first', { n: 1 }, { id, timeoutMs: 20_000 });
    await pending(id);
    for (const [what, args] of Object.entries(edits)) {
      const submitted = await answerTo(agent.submit('confirm_first', args));
      expect(submitted, what).toMatchObject({ code: expect.stringMatching(/^(PAYLOAD_TOO_LARGE|BAD_REQUEST)$/) as string });
      expect({ what, edit: await answerTo(approver.decide(id, { decision: 'modify', arguments: args })) }).toEqual({ what, edit: submitted });
      expect((await pending(id)).arguments, what).toEqual({ n: 1 });
    }
    expect(await approver.decide(id, { decision: 'approve' })).toEqual({ id, status: 'queued' });
    expect(await result).toMatchObject({ isError: false, content: 'confirmed' });
  });

  it('tells the waiting agent a denial with its reason, thrown as a denial at submission is; nothing runs', async () => {
    const id = `deny-${randomUUID()}`;
    const result = agent.call('confirm_echo', { text: 'no' }, { id, timeoutMs: 20_000 });
    // Settled now, so its rejection is handled before the decision below makes it.
    const outcome = result.then(() => 'resolved', (error: unknown) => error);
    await pending(id);
    expect(await approver.decide(id, { decision: 'deny', reason: 'not during the freeze' })).toMatchObject({ id, status: 'failed' });
    expect(await outcome).toMatchObject({ code: 'APPROVAL_DENIED', httpStatus: 403, message: expect.stringContaining('not during the freeze') as string });
    expect(await runs(id)).toBe(0);
  });

  it('expires a call nobody decided (fail closed, EXPIRED — not a denial); a late decision is refused', async () => {
    // A dispatcher whose approvals expire quickly, in the same fleet.
    const hasty = await fleet.dispatcher({ FORGE_DEV_MODE: '0', FORGE_APPROVAL_DEADLINE_MS: '1000' });
    const waiting = new FleetClient({ url: hasty.url, token: await fleet.token({ subject: 'agent-1' }) });
    const id = `expire-${randomUUID()}`;
    // It never ran: thrown, as a refusal is.
    await expect(waiting.call('confirm_echo', { text: 'late' }, { id, timeoutMs: 20_000 }).finally(() => waiting.close())).rejects.toMatchObject({
      code: 'EXPIRED',
      httpStatus: 410,
      // The tool has no deadline of its own and there is no policy file: the default applied, set by the environment here.
      details: { deadlineFrom: 'default' },
      message: expect.stringContaining('the default applied (approval.deadlineMs in the policy file, or FORGE_APPROVAL_DEADLINE_MS without one)') as string,
    });
    await expect(approver.decide(id, { decision: 'approve' })).rejects.toMatchObject({ code: 'NOT_AWAITING_APPROVAL', httpStatus: 409 });
    expect(await runs(id)).toBe(0);
  });

  it("names an MCP servers file's tools.<name>.approvalDeadlineMs as what set an expired call's deadline, not the policy (found by QA)", async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'forge-approvals-')), 'servers.yaml');
    const server = { command: process.execPath, args: [EVERYTHING], env: { PATH: { fromEnv: 'PATH' } }, tier: 'platform', tools: { echo: { requiresConfirmation: true, approvalDeadlineMs: 1000 } } };
    writeFileSync(file, stringify({ version: 1, servers: { everything: server } }));
    await fleet.worker({ tier: 'platform', tools: false, mcp: file });
    await until('everything.echo in the catalog', async () => (await agent.tools()).some((tool) => tool.name === 'everything.echo'));
    const id = `expire-mcp-${randomUUID()}`;
    const outcome = await agent.call('everything.echo', { message: 'late' }, { id, timeoutMs: 20_000 }).then(
      () => undefined,
      (error: unknown) => error as { code: string; message: string; details: Record<string, unknown> },
    );
    expect(outcome).toMatchObject({ code: 'EXPIRED', details: { deadlineFrom: 'tool' } });
    expect(outcome?.message).toContain("raise the tool's own approvalDeadlineMs, which set this one (its definition's, or for an MCP server's tool tools.<name>.approvalDeadlineMs in the servers file)");
    expect(outcome?.message).not.toMatch(/approval deadline in the policy$/);
  });

  it("names the policy file's approval.deadlines entry that set an expired call's deadline", async () => {
    const policyFile = join(mkdtempSync(join(tmpdir(), 'forge-approvals-')), 'policy.yaml');
    writeFileSync(policyFile, stringify({ version: 1, approval: { default: 'tier', deadlines: { confirm_echo: 1000 } } }));
    const strict = await fleet.dispatcher({ FORGE_DEV_MODE: '0', FORGE_POLICY_FILE: policyFile });
    const waiting = new FleetClient({ url: strict.url, token: await fleet.token({ subject: 'agent-1' }) });
    const id = `expire-policy-${randomUUID()}`;
    await expect(waiting.call('confirm_echo', { text: 'late' }, { id, timeoutMs: 20_000 }).finally(() => waiting.close())).rejects.toMatchObject({
      code: 'EXPIRED',
      details: { deadlineFrom: 'policy', policyEntry: 'confirm_echo' },
      message: expect.stringContaining("raise the deadline the policy file gives it: its approval.deadlines entry 'confirm_echo' set this one") as string,
    });
  });

  it('refuses deciding twice, an unknown call, a call that needs no approval, and deciding without the approver role; nothing runs twice', async () => {
    const id = `twice-${randomUUID()}`;
    const result = agent.call('confirm_echo', { text: 'once' }, { id, timeoutMs: 20_000 });
    await pending(id);
    await expect(agent.decide(id, { decision: 'approve' })).rejects.toMatchObject({ code: 'FORBIDDEN', httpStatus: 403 });
    await expect(agent.approvals()).rejects.toMatchObject({ code: 'FORBIDDEN' });
    const [first, second] = await Promise.allSettled([approver.decide(id, { decision: 'approve' }), approver.decide(id, { decision: 'approve' })]);
    const outcomes = [first, second].map((s) => (s.status === 'fulfilled' ? 'ok' : (s.reason as { code: string }).code)).sort();
    expect(outcomes).toEqual(['NOT_AWAITING_APPROVAL', 'ok']);
    expect(await result).toMatchObject({ isError: false, structuredContent: { runs: 1 } });
    await expect(approver.decide(id, { decision: 'deny' })).rejects.toMatchObject({ code: 'NOT_AWAITING_APPROVAL' });
    await expect(approver.decide(`unknown-${randomUUID()}`, { decision: 'approve' })).rejects.toMatchObject({ code: 'CALL_NOT_FOUND' });
    const plain = `plain-${randomUUID()}`;
    await agent.call('echo', { a: 1 }, { id: plain });
    await expect(approver.decide(plain, { decision: 'approve' })).rejects.toMatchObject({ code: 'NOT_AWAITING_APPROVAL' });
    expect(await runs(id)).toBe(1);
  });
});
