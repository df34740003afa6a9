import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { connect, createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FleetClient } from '@forge-fleet/client';
import { describe, expect, it } from 'vitest';
import { type FleetProcess, ROOT, TestFleet } from '../fixtures/fleet.js';
import { ATTACK_NAMES } from '../fixtures/hardening-tools.js';
import { until } from '../fixtures/wait.js';

/**
 * Attacks on the sandbox from inside it (issue #15, items 1–3), through a
 * real fleet: a platform worker sandboxing test/fixtures/hardening-tools.ts.
 *
 * Every worker here runs under `setsid`, in a process group and session of
 * its own: a signal that escapes its sandbox then kills that worker (what the
 * test must see) and never the test runner beside it.
 */
const TOOLS = join(ROOT, 'test', 'fixtures', 'hardening-tools.ts');
const SETSID = ['/usr/bin/setsid'];
/** Bounds each awaited call, so that a stuck call fails the test with a message rather than at the test's timeout. */
const CALL_TIMEOUT_MS = 20_000;

/** Every process below `pid`, children before grandchildren. */
function descendants(pid: number): number[] {
  const found: number[] = [];
  const visit = (parent: number): void => {
    let tasks: string[];
    try {
      tasks = readdirSync(`/proc/${parent}/task`);
    } catch {
      return;
    }
    for (const task of tasks) {
      let children: string[];
      try {
        children = readFileSync(`/proc/${parent}/task/${task}/children`, 'utf8').trim().split(/\s+/).filter(Boolean);
      } catch {
        continue;
      }
      for (const child of children.map(Number)) {
        found.push(child);
        visit(child);
      }
    }
  };
  visit(pid);
  return found;
}

/** Whether `pid` is a live process (a zombie waiting for its reaper counts as gone). */
function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

/** The sandboxed Node processes below a worker: the ones running the bundle, with no children of their own. */
function sandboxNodes(worker: number): number[] {
  return descendants(worker).filter((pid) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('sandbox.mjs') && descendants(pid).length === 0;
    } catch {
      return false;
    }
  });
}

function running(proc: FleetProcess): boolean {
  return proc.proc.exitCode === null && proc.proc.signalCode === null;
}

/** A fleet with one sandboxing platform worker (own session) and a dispatcher; callers get tokens of their own subject. */
async function sandboxedFleet(env: Record<string, string> = {}): Promise<{ fleet: TestFleet; worker: FleetProcess; caller(subject: string): Promise<FleetClient>; clients: FleetClient[] }> {
  const fleet = new TestFleet();
  const worker = await fleet.worker({ tier: 'platform', tools: TOOLS, env: { FORGE_SANDBOX: 'on', FORGE_SANDBOX_SIZE: '2', ...env }, wrapper: SETSID });
  const dispatcher = await fleet.dispatcher({ FORGE_DEV_MODE: '0' });
  const clients: FleetClient[] = [];
  const caller = async (subject: string): Promise<FleetClient> => {
    const client = new FleetClient({ url: dispatcher.url, token: await fleet.token({ subject }) });
    clients.push(client);
    return client;
  };
  return { fleet, worker, caller, clients };
}

async function teardown(setup: { fleet: TestFleet; clients: FleetClient[] }): Promise<void> {
  await Promise.all(setup.clients.map((c) => c.close()));
  await setup.fleet.stopAll();
}

/**
 * Sends `signal {target}` while a `slow` call of another caller is running,
 * and checks that the worker and that call both come through.
 */
async function signalBesideBystander(setup: Awaited<ReturnType<typeof sandboxedFleet>>, targets: readonly string[]): Promise<void> {
  const victim = await setup.caller('victim');
  const attacker = await setup.caller('attacker');
  for (const target of targets) {
    const submitted = await victim.submit('slow', { ms: 1500 });
    await until(`the bystander call before '${target}' to run`, async () => (await victim.get(submitted.id)).status === 'running');
    const attack = await attacker.call('signal', { target }, { timeoutMs: CALL_TIMEOUT_MS }).catch((error: unknown) => error);
    expect(running(setup.worker), `the worker after a handler sent SIGKILL to '${target}':\n${setup.worker.output().slice(-2000)}`).toBe(true);
    // The attack itself goes nowhere: refused in the sandbox, or it ended only its own sandbox process.
    expect(attack).toMatchObject({ isError: true });
    expect(await victim.wait(submitted.id, { timeoutMs: CALL_TIMEOUT_MS })).toMatchObject({ isError: false, content: 'slept' });
  }
  expect(await victim.call('slow', { ms: 0 }, { timeoutMs: CALL_TIMEOUT_MS })).toMatchObject({ isError: false });
}

describe('sandbox hardening: signals (item 1)', () => {
  it("a handler that signals its parent, its process group or every process reaches neither the worker nor another caller's call", async () => {
    const setup = await sandboxedFleet();
    try {
      // The PID namespace is in force, so even before any fix `kill(-1)` could only reach the sandbox's own namespace.
      expect(setup.worker.output()).not.toMatch(/PID namespace/);
      await signalBesideBystander(setup, ['ppid', 'group', 'all']);
    } finally {
      await teardown(setup);
    }
  }, 90_000);

  it('without a PID namespace (no unshare, no bwrap) a handler still cannot signal the worker or its group', async () => {
    // No PATH: unshare, bwrap, prlimit and setpriv cannot be found; only the JavaScript layers and the session remain.
    const setup = await sandboxedFleet({ PATH: '/nonexistent', FORGE_STRICT_SANDBOX: '0' });
    try {
      expect(setup.worker.output()).toMatch(/PID namespace/);
      // Never `all` here: without a PID namespace kill(-1) would reach every process this uid may signal, on the whole machine.
      await signalBesideBystander(setup, ['ppid', 'group']);
    } finally {
      await teardown(setup);
    }
  }, 60_000);

  it('kill -9 of the worker leaves no sandbox process behind, not even one frozen in a call', async () => {
    const setup = await sandboxedFleet();
    let left: number[] = [];
    try {
      const attacker = await setup.caller('attacker');
      const frozen = await attacker.submit('freeze');
      await until('the freezing call to run', async () => (await attacker.get(frozen.id)).status === 'running');
      left = descendants(setup.worker.pid);
      expect(sandboxNodes(setup.worker.pid).length).toBeGreaterThanOrEqual(2);
      await setup.worker.stop('SIGKILL');
      await until('every process the worker had started to end with it', () => left.every((pid) => !alive(pid)));
    } finally {
      // Before the fix the frozen sandbox outlives its worker for ever: end what this test started.
      for (const pid of left.filter(alive)) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // Gone meanwhile.
        }
      }
      await teardown(setup);
    }
  });
});

describe('sandbox hardening: Unix sockets (item 2)', () => {
  it("no object trick reaches a host-side Unix socket, and the sandbox's filesystem has no host socket in it", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'forge-hardening-'));
    const path = join(dir, 'host.sock');
    let connections = 0;
    const server: Server = createServer((socket) => {
      connections += 1;
      socket.destroy();
    });
    await new Promise<void>((resolve) => server.listen(path, resolve));
    const setup = await sandboxedFleet({ FORGE_SANDBOX_SIZE: '1' });
    try {
      // The socket is live: the host reaches it.
      await new Promise<void>((resolve, reject) => connect(path, resolve).once('error', reject));
      await until('the host connection to be counted', () => connections === 1);
      const client = await setup.caller('attacker');
      const outcomes: Record<string, unknown> = {};
      for (const how of ATTACK_NAMES) {
        const result = await client.call('unix_attack', { path, how }, { timeoutMs: CALL_TIMEOUT_MS });
        outcomes[how] = result.isError ? 'refused' : result.content;
      }
      expect(outcomes).toEqual(Object.fromEntries(ATTACK_NAMES.map((how) => [how, 'refused'])));
      expect(connections).toBe(1);
      // The kernel layer on its own: the path does not exist in the sandbox's mount namespace at all.
      expect(setup.worker.output()).toContain('bubblewrap+permission-model');
      const nodes = sandboxNodes(setup.worker.pid);
      expect(nodes.length).toBeGreaterThanOrEqual(1);
      for (const pid of nodes) {
        expect(existsSync(`/proc/${pid}/root${process.execPath}`)).toBe(true);
        expect(existsSync(`/proc/${pid}/root${path}`)).toBe(false);
        // Only what Node needs: no /run, /var/run, /etc, /home of the host.
        expect(readdirSync(`/proc/${pid}/root/`).filter((entry) => !['dev', 'proc', 'usr', 'lib', 'lib64', 'tmp'].includes(entry))).toEqual([]);
        // The bundle's own directory is all of /tmp there is.
        expect(readdirSync(`/proc/${pid}/root/tmp`).every((entry) => entry.startsWith('forge-sandbox-'))).toBe(true);
      }
    } finally {
      await teardown(setup);
      await new Promise((resolve) => server.close(resolve));
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});

describe("sandbox hardening: the host kernel's settings", () => {
  // A worker run by root (as in CI) makes the sandbox's root the host's root, and the owner of a file may write it
  // without any capability: /proc/sys (kernel.core_pattern among them) must be mounted read-only in the sandbox.
  it("mounts the sandbox's /proc read-only, so no sysctl of the host can be written from it", async () => {
    const setup = await sandboxedFleet({ FORGE_SANDBOX_SIZE: '1' });
    try {
      const client = await setup.caller('attacker');
      expect(await client.call('slow', { ms: 1 }, { timeoutMs: CALL_TIMEOUT_MS })).toMatchObject({ isError: false });
      const nodes = sandboxNodes(setup.worker.pid);
      expect(nodes.length).toBeGreaterThanOrEqual(1);
      for (const pid of nodes) {
        // mountinfo: id, parent, dev, root, mount point, options, …
        const mounts = readFileSync(`/proc/${pid}/mountinfo`, 'utf8').trim().split('\n').map((line) => line.split(' '));
        const proc = mounts.filter((fields) => fields[4] === '/proc');
        expect(proc.length).toBeGreaterThanOrEqual(1);
        for (const fields of proc) expect(fields[5]!.split(',')).toContain('ro');
      }
    } finally {
      await teardown(setup);
    }
  }, 60_000);
});

describe('sandbox hardening: a process frozen at zero CPU (item 3)', () => {
  it("two freezing calls on a pool of two fail, while another caller's calls in flight all complete", async () => {
    const setup = await sandboxedFleet({ FORGE_SANDBOX_SIZE: '2' });
    try {
      const victim = await setup.caller('victim');
      const attacker = await setup.caller('attacker');
      let started = 0;
      const lane = async (): Promise<unknown[]> => {
        const results: unknown[] = [];
        for (let i = 0; i < 10; i++) {
          started += 1;
          const result = await victim.call('slow', { ms: 100 }, { timeoutMs: CALL_TIMEOUT_MS }).catch((error: unknown) => String(error));
          results.push(typeof result === 'string' ? result : { isError: result.isError, content: result.content });
        }
        return results;
      };
      const lanes = Promise.all([lane(), lane(), lane(), lane()]);
      await until('the victim calls to be under way', () => started >= 8);
      const freezes = Promise.all([attacker.call('freeze', {}, { timeoutMs: CALL_TIMEOUT_MS }), attacker.call('freeze', {}, { timeoutMs: CALL_TIMEOUT_MS })].map((p) => p.catch((error: unknown) => String(error))));
      expect((await lanes).flat()).toEqual(Array.from({ length: 40 }, () => ({ isError: false, content: 'slept' })));
      for (const frozen of await freezes) {
        expect(frozen).toMatchObject({ isError: true, error: { code: 'RESOURCE_LIMIT', details: { limit: 'event-loop' } } });
      }
      // Replaced: the pool serves again at full size.
      expect(await Promise.all([victim.call('slow', { ms: 0 }), victim.call('slow', { ms: 0 })])).toMatchObject([{ isError: false }, { isError: false }]);
      expect(running(setup.worker)).toBe(true);
    } finally {
      await teardown(setup);
    }
  }, 90_000);
});
