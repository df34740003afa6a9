import { join } from 'node:path';
import { FleetClient } from '@forge-fleet/client';
import type { ToolResult } from '@forge-fleet/shared';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, TestFleet } from '../fixtures/fleet.js';

/**
 * Issue #15, item 4: calls of different callers shared a sandbox process, so
 * a handler of one agent could read another agent's arguments (a wrapped
 * `JSON.parse`), answer another agent's call with a forged result (written on
 * the process's channel), and poison `Object.prototype` and module state for
 * later calls. Through the real fleet — dispatcher, signed jobs, a platform
 * worker with one warm sandbox process — with tokens of distinct subjects.
 */
const TOOLS = join(ROOT, 'test', 'fixtures', 'caller-spy-tools.ts');

interface Snapshot {
  readonly polluted: string | null;
  readonly state: string[];
  readonly captured: string[];
}

const clean: Snapshot = { polluted: null, state: [], captured: [] };

function structured<T>(result: ToolResult): T {
  expect(result, result.content).toMatchObject({ isError: false });
  return result.structuredContent as T;
}

async function fleetWith(env: Record<string, string>): Promise<{ fleet: TestFleet; mallory: FleetClient; alice: FleetClient; carol: FleetClient }> {
  const fleet = new TestFleet();
  // One warm process: on a pool that shares, every call lands in the same one.
  await fleet.worker({ tier: 'platform', tools: TOOLS, env: { FORGE_SANDBOX: 'on', FORGE_SANDBOX_SIZE: '1', ...env } });
  const dispatcher = await fleet.dispatcher({ FORGE_DEV_MODE: '0' });
  const mallory = new FleetClient({ url: dispatcher.url, token: await fleet.token({ subject: 'mallory' }) });
  const alice = new FleetClient({ url: dispatcher.url, token: await fleet.token({ subject: 'alice' }) });
  const carol = new FleetClient({ url: dispatcher.url, token: await fleet.token({ subject: 'carol' }) });
  return { fleet, mallory, alice, carol };
}

describe('sandbox processes and callers (default isolation: one caller per process)', () => {
  let fleet: TestFleet;
  let mallory: FleetClient;
  let alice: FleetClient;
  let carol: FleetClient;

  beforeAll(async () => {
    ({ fleet, mallory, alice, carol } = await fleetWith({}));
  });

  afterAll(async () => {
    await Promise.all([mallory?.close(), alice?.close(), carol?.close()]);
    await fleet?.stopAll();
  });

  it("keeps another caller's hooks, forged results, prototype poison and module state away from a caller's calls", async () => {
    expect(structured<{ seen: Snapshot }>(await mallory.call('taint', { marker: 'mallory' })).seen).toEqual(clean);
    // Alice's call is answered by her own handler, not by the result mallory's hook writes ahead of it.
    expect(await alice.call('victim', { secret: 'alice-secret-1' })).toMatchObject({ isError: false, content: 'kept alice-secret-1' });
    expect(structured<Snapshot>(await alice.call('look'))).toEqual(clean);
    // Nor did mallory's hook see her arguments: mallory's process ran none of alice's calls.
    const mallorySees = structured<Snapshot>(await mallory.call('look'));
    expect(mallorySees.captured.join('\n')).not.toContain('alice-secret');
    // Within one caller a warm process is kept (what `--sandbox-isolation call` is for).
    expect(mallorySees.state).toEqual(['mallory']);
  });

  it('never hands a process to another caller after it ran one caller\'s calls, however many calls are in flight', async () => {
    await mallory.call('taint', { marker: 'mallory-again' });
    const answers = await Promise.all(Array.from({ length: 40 }, (_, i) => alice.call('victim', { secret: `alice-${i}` })));
    expect(answers.map((a) => a.content)).toEqual(Array.from({ length: 40 }, (_, i) => `kept alice-${i}`));
    const looks = await Promise.all(Array.from({ length: 8 }, () => alice.call('look')));
    for (const look of looks) expect(structured<Snapshot>(look)).toEqual(clean);
    expect(structured<Snapshot>(await mallory.call('look')).captured.join('\n')).not.toContain('alice-');
  });

  it("runs a tool flagged sandboxIsolation: 'call' in a process of its own each time, even for one caller", async () => {
    expect(structured<{ seen: Snapshot }>(await alice.call('taint_once', { marker: 'alice-once' })).seen).toEqual(clean);
    expect(structured<{ seen: Snapshot }>(await alice.call('taint_once', { marker: 'alice-twice' })).seen).toEqual(clean);
    // Nor does its state reach the caller's own process.
    expect(structured<Snapshot>(await alice.call('look'))).toEqual(clean);
  });
});

describe('sandbox processes under FORGE_SANDBOX_ISOLATION=call (one process per call)', () => {
  let fleet: TestFleet;
  let mallory: FleetClient;
  let alice: FleetClient;
  let carol: FleetClient;

  beforeAll(async () => {
    ({ fleet, mallory, alice, carol } = await fleetWith({ FORGE_SANDBOX_ISOLATION: 'call' }));
  });

  afterAll(async () => {
    await Promise.all([mallory?.close(), alice?.close(), carol?.close()]);
    await fleet?.stopAll();
  });

  it("shows a caller's later call nothing of its earlier one, and other callers nothing at all", async () => {
    expect(structured<{ seen: Snapshot }>(await mallory.call('taint', { marker: 'mallory' })).seen).toEqual(clean);
    expect(structured<Snapshot>(await mallory.call('look'))).toEqual(clean);
    expect(structured<{ seen: Snapshot }>(await mallory.call('taint', { marker: 'mallory-2' })).seen).toEqual(clean);
    expect(await alice.call('victim', { secret: 'alice-secret-2' })).toMatchObject({ isError: false, content: 'kept alice-secret-2' });
    const answers = await Promise.all(Array.from({ length: 6 }, () => mallory.call('taint', { marker: 'burst' })));
    for (const answer of answers) expect(structured<{ seen: Snapshot }>(answer).seen).toEqual(clean);
  });
});

describe('sandbox processes at the cap (FORGE_SANDBOX_MAX_PROCESSES=2)', () => {
  let fleet: TestFleet;
  let mallory: FleetClient;
  let alice: FleetClient;
  let carol: FleetClient;

  beforeAll(async () => {
    ({ fleet, mallory, alice, carol } = await fleetWith({ FORGE_SANDBOX_MAX_PROCESSES: '2' }));
  });

  afterAll(async () => {
    await Promise.all([mallory?.close(), alice?.close(), carol?.close()]);
    await fleet?.stopAll();
  });

  it("gives a new caller the least recently used idle process's place, never a share of it", async () => {
    await mallory.call('taint', { marker: 'mallory' });
    await alice.call('victim', { secret: 'alice-secret-3' });
    // Both places are taken (mallory's, alice's): carol's call takes over the idle one used longest ago.
    expect(structured<Snapshot>(await carol.call('look'))).toEqual(clean);
    // Mallory's process is gone with its hooks; her next call starts afresh, in a process of her own.
    expect(structured<Snapshot>(await mallory.call('look'))).toEqual(clean);
  });

  it('drains a busy process of another caller for a new caller rather than letting it wait for ever or share', async () => {
    await mallory.call('taint', { marker: 'mallory-busy' });
    const held = [mallory.call('hold', { ms: 1500 }), alice.call('hold', { ms: 1500 })];
    expect(structured<Snapshot>(await carol.call('look'))).toEqual(clean);
    for (const result of await Promise.all(held)) expect(result.isError, result.content).toBe(false);
  });
});
