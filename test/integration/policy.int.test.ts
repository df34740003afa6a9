import { randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FleetClient } from '@forge-fleet/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestFleet } from '../fixtures/fleet.js';

/** A policy file drives scopes and approvals in a running dispatcher. */
describe('a dispatcher run by a policy file', () => {
  const fleet = new TestFleet();
  const dir = mkdtempSync(join(tmpdir(), 'forge-policy-int-'));
  const policyFile = join(dir, 'policy.yaml');
  let url = '';
  const client = async (options: Parameters<TestFleet['token']>[0]) => new FleetClient({ url, token: await fleet.token(options) });

  beforeAll(async () => {
    writeFileSync(
      policyFile,
      ['version: 1', 'approval:', '  default: tier', '  people: [echo]', '  deadlines: { echo: 600000 }', 'scopes:', '  research: [echo, count]', 'defaultScope: [echo, count, guess]', ''].join('\n'),
    );
    await fleet.worker({ tier: 'platform' });
    ({ url } = await fleet.dispatcher({ FORGE_DEV_MODE: '0', FORGE_POLICY_FILE: policyFile }));
  });

  afterAll(() => fleet.stopAll());

  it('lists and admits by the policy\'s scopes', async () => {
    const research = await client({ subject: 'r', task: 'research' });
    try {
      expect((await research.tools()).map((t) => t.name)).toEqual(['count', 'echo']);
      await expect(research.call('guess')).rejects.toMatchObject({ code: 'OUT_OF_SCOPE' });
      expect(await research.call('count', { n: 3 })).toMatchObject({ isError: false, structuredContent: { n: 3 } });
    } finally {
      await research.close();
    }
  });

  it('sends the tools it names to a person, with its deadline', async () => {
    const agent = await client({ subject: 'a' });
    const approver = await client({ subject: 'p', role: 'approver' });
    try {
      const id = `policy-${randomUUID()}`;
      expect(await agent.submit('echo', { x: 1 }, { id })).toMatchObject({ id, status: 'awaiting_approval', reason: expect.stringContaining('policy') as string });
      const pending = (await approver.approvals()).find((a) => a.id === id);
      expect(pending).toBeDefined();
      expect(pending!.deadline - pending!.createdAt).toBe(600_000);
      await approver.decide(id, { decision: 'approve' });
      expect(await agent.wait(id, { timeoutMs: 10_000 })).toMatchObject({ isError: false });
    } finally {
      await Promise.all([agent.close(), approver.close()]);
    }
  });

  it('shows the effective policy to admins only', async () => {
    const admin = await client({ subject: 'ops', role: 'admin' });
    const agent = await client({ subject: 'a' });
    try {
      const response = await fetch(`${url}/v1/policy`, { headers: { authorization: `Bearer ${await fleet.token({ subject: 'ops', role: 'admin' })}` } });
      expect(await response.json()).toMatchObject({ source: policyFile, policy: { approval: { people: ['echo'] }, scopes: { research: ['echo', 'count'] } } });
      const refused = await fetch(`${url}/v1/policy`, { headers: { authorization: `Bearer ${await fleet.token({ subject: 'a' })}` } });
      expect(refused.status).toBe(403);
    } finally {
      await Promise.all([admin.close(), agent.close()]);
    }
  });

  it('refuses to start with a policy file and the settings it replaces, or with a bad file, naming the problem', async () => {
    await expect(fleet.dispatcher({ FORGE_POLICY_FILE: policyFile, FORGE_SCOPES: '{"x":["echo"]}' })).rejects.toThrow(/CONFIG_INVALID.*FORGE_POLICY_FILE replaces FORGE_SCOPES/s);
    const bad = join(dir, 'bad.yaml');
    writeFileSync(bad, 'version: 1\napproval:\n  default: maybe\n');
    await expect(fleet.dispatcher({ FORGE_POLICY_FILE: bad })).rejects.toThrow(/bad\.yaml:3:\d+: approval\.default/);
  });
});
