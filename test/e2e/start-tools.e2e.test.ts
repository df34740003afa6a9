import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '@forge-fleet/local-redis';
import type { QueueStatsList } from '@forge-fleet/shared';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT } from '../fixtures/fleet.js';
import { listening, npmStart, type NpmStart } from '../fixtures/npm-start.js';

/** The test's own tools module (a Platform tool and a Host tool of pool `ops`), as a newcomer passes it: relative. */
const MY_TOOLS = 'test/fixtures/start-tools.mjs';

/** `npx forge …` from the repository, as the README and `npm start` tell people to run it. */
function forge(args: readonly string[]): { code: number | null; stdout: string; stderr: string } {
  const run = spawnSync('npx', ['forge', ...args], { cwd: ROOT, encoding: 'utf8' });
  return { code: run.status, stdout: run.stdout, stderr: run.stderr };
}

/** POST /v1/calls, waiting for the end. */
async function call(url: string, token: string, name: string, args: Record<string, unknown>) {
  const res = await fetch(`${url}/v1/calls?wait=20000`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` }, body: JSON.stringify({ name, arguments: args }) });
  return { status: res.status, body: (await res.json()) as { status?: string; result?: { content: string; isError: boolean }; error?: { code: string; message: string } } };
}

/** Resolves once no process of group `pgid` is left (the worker withdrew from the catalog and exited); bounded. */
async function groupGone(pgid: number, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      process.kill(-pgid, 0);
    } catch {
      return;
    }
    if (Date.now() > deadline) throw new Error(`process group ${pgid} still runs after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Stops `npm start` with Ctrl-C and checks that it stopped in order, leaving its port free. */
async function stopCleanly(fleet: NpmStart, port: number): Promise<void> {
  const { code, signal } = await fleet.stop();
  // npm re-raises the Ctrl-C it got once its script has exited; the script itself stopped in order.
  expect(code === 0 || signal === 'SIGINT', `exit ${code} / ${signal}\n${fleet.stderr()}`).toBe(true);
  expect(fleet.stdout()).toContain('Forge Fleet: stopped.');
  expect(await listening(port)).toBe(false);
}

/**
 * Section 5 of issue #14, "your own tools, first day": `npm start -- --tools`
 * with a module of one's own, tokens minted from the keys `npm start` keeps in
 * its state dir, a worker more started with the command it prints, restarts,
 * and starts that fail.
 */
describe('npm start with your own tools', () => {
  const stateDir = mkdtempSync(join(tmpdir(), 'forge-e2e-tools-'));
  afterAll(() => rmSync(stateDir, { recursive: true, force: true }));
  const keysDir = join(stateDir, 'keys');

  it('serves your module beside the examples (a worker per tier and pool), with keys it makes once and reuses after a restart', async () => {
    const port = await freePort();
    const env = { PORT: String(port), FORGE_STATE_DIR: stateDir };
    const url = `http://127.0.0.1:${port}`;
    let extra: ChildProcess | undefined;
    let fleet = npmStart(['--tools', MY_TOOLS], env);
    try {
      await fleet.ready;
      const out = fleet.stdout();
      expect(out).toContain(`${MY_TOOLS}: workers for platform, host pool ops (tools: shout, ops.restart)`);
      expect(out).toMatch(/examples\/tools\.ts: workers for platform, embedded, host /);
      expect(out).toContain(`keys: ${keysDir} (made now`);

      // The files and formats of `forge keys init`, private ones readable by their owner only.
      expect(statSync(join(keysDir, 'token.key')).mode & 0o777).toBe(0o600);
      expect(statSync(join(keysDir, 'signing.secret')).mode & 0o777).toBe(0o600);
      expect(readFileSync(join(keysDir, 'token.pub'), 'utf8')).toMatch(/^-----BEGIN PUBLIC KEY-----/);
      const keys = ['token.key', 'token.pub', 'signing.secret'].map((f) => readFileSync(join(keysDir, f), 'utf8'));

      // A token minted from those keys, as the README says, works against this fleet.
      const minted = forge(['token', 'mint', '--key', join(keysDir, 'token.key'), '--sub', 'e2e', '--grant', 'ops.*']);
      expect(minted.code, minted.stderr).toBe(0);
      const token = minted.stdout.trim();
      expect(await call(url, token, 'shout', { text: 'hello' })).toMatchObject({ status: 200, body: { status: 'completed', result: { content: 'HELLO', isError: false } } });
      expect(await call(url, token, 'ops.restart', { service: 'billing' })).toMatchObject({ status: 200, body: { result: { content: '{"restarted":"billing"}' } } });
      expect(await call(url, token, 'clock', {})).toMatchObject({ status: 200, body: { status: 'completed' } });

      // The approver recipe it prints, verbatim: an approver may list the queues.
      const approverLine = out.split('\n').find((l) => l.includes('export APPROVER='));
      expect(approverLine?.trim()).toBe(`export APPROVER=$(npx forge token mint --key ${join(keysDir, 'token.key')} --sub alice --role approver)`);
      const approver = spawnSync('sh', ['-c', `${approverLine!.trim()} && printf %s "$APPROVER"`], { cwd: ROOT, encoding: 'utf8' }).stdout;
      const queues = (await (await fetch(`${url}/v1/queues`, { headers: { authorization: `Bearer ${approver}` } })).json()) as QueueStatsList;
      expect(queues.queues.find((q) => q.lane === 'host.ops')?.workers).toBe(1);

      // The extra-worker command it prints, verbatim: one more worker of pool ops joins, and calls keep working.
      const workerLine = out.split('\n').find((l) => l.includes('npx forge-worker'))!.trim();
      expect(workerLine).toMatch(/^REDIS_URL=redis:\/\/127\.0\.0\.1:\d+ FORGE_CALL_KEY=\$\(npx forge keys worker-key --secret \S+\/keys\/signing\.secret --tier host --pool ops\) npx forge-worker --tier host --pool ops --tools test\/fixtures\/start-tools\.mjs$/);
      // Its own process group (sh, npx, the worker): stopped as a whole below.
      extra = spawn('sh', ['-c', workerLine], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
      let extraOut = '';
      await new Promise<void>((resolve, reject) => {
        const onData = (d: Buffer): void => {
          extraOut += d.toString();
          if (extraOut.includes('worker pool ready')) resolve();
        };
        extra!.stdout!.on('data', onData);
        extra!.stderr!.on('data', onData);
        extra!.once('exit', (code) => reject(new Error(`the extra worker exited (${code}):\n${extraOut}`)));
      });
      const after = (await (await fetch(`${url}/v1/queues`, { headers: { authorization: `Bearer ${approver}` } })).json()) as QueueStatsList;
      expect(after.queues.find((q) => q.lane === 'host.ops')?.workers).toBe(2);
      // Calls signed for pool ops verify on both workers (a wrong FORGE_CALL_KEY would fail them as FORGED_CALL).
      const many = await Promise.all(Array.from({ length: 8 }, (_, i) => call(url, token, 'ops.restart', { service: `svc-${'abcdefgh'[i]}` })));
      expect(many.map((r) => r.body.result?.isError)).toEqual(Array(8).fill(false));
      process.kill(-extra.pid!, 'SIGTERM');
      await groupGone(extra.pid!);
      await stopCleanly(fleet, port);

      // Restart, serving only the module this time: same keys, so the token minted before still works.
      fleet = npmStart(['--no-examples', '--tools', MY_TOOLS], env);
      await fleet.ready;
      expect(fleet.stdout()).toContain(`keys: ${keysDir} (reused`);
      expect(['token.key', 'token.pub', 'signing.secret'].map((f) => readFileSync(join(keysDir, f), 'utf8'))).toEqual(keys);
      expect(await call(url, token, 'ops.restart', { service: 'again' })).toMatchObject({ status: 200, body: { result: { content: '{"restarted":"again"}' } } });
      const { tools } = (await (await fetch(`${url}/v1/tools`, { headers: { authorization: `Bearer ${token}` } })).json()) as { tools: { name: string }[] };
      expect(tools.map((t) => t.name).sort()).toEqual(['ops.restart', 'shout']);
      await stopCleanly(fleet, port);
    } finally {
      if (extra?.exitCode === null) {
        try {
          process.kill(-extra.pid!, 'SIGKILL');
        } catch {
          // already gone
        }
      }
      await fleet.stop();
    }
  });

  it('stops everything it started, redis-server too, and says why in one line when the port is taken', async () => {
    const port = await freePort();
    // Holds the port; hangs up on whoever connects (npm start polls /readyz there until its dispatcher gives up).
    const squatter: Server = createServer((socket) => socket.destroy());
    await new Promise<void>((resolve) => squatter.listen(port, '127.0.0.1', resolve));
    const fleet = npmStart([], { PORT: String(port), FORGE_STATE_DIR: stateDir });
    try {
      const { code } = await Promise.race([fleet.exited, new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`npm start still runs:\n${fleet.stdout()}\n${fleet.stderr()}`)), 60_000).unref())]);
      expect(code).toBe(1);
      expect(fleet.stderr()).toBe(`forge start: port ${port} is in use; set PORT=… to another port\n`);
      // It had started its redis-server (the port is checked just before the dispatcher starts); that one is gone now.
      const redisPort = Number(/started redis-server at redis:\/\/127\.0\.0\.1:(\d+)/.exec(fleet.stdout())?.[1]);
      expect(redisPort, fleet.stdout()).toBeGreaterThan(0);
      expect(await listening(redisPort)).toBe(false);
      expect(fleet.stdout()).toContain('Forge Fleet: stopped.');
    } finally {
      await fleet.stop();
      await new Promise<void>((resolve) => squatter.close(() => resolve()));
    }
  });

  it('refuses, before starting anything, a module whose tool clashes with the examples, a missing module and a wrong option', async () => {
    const env = { PORT: String(await freePort()), FORGE_STATE_DIR: stateDir };
    const clash = npmStart(['--tools', 'test/fixtures/conflicting-tools.ts'], env);
    expect((await clash.exited).code).toBe(1);
    expect(clash.stderr()).toBe("forge start: 'echo' is in both examples/tools.ts and test/fixtures/conflicting-tools.ts; rename it in yours, or serve only yours with --no-examples\n");
    expect(clash.stdout()).not.toContain('redis-server');

    const missing = npmStart([], { ...env, FORGE_TOOLS: './nowhere.mjs' });
    expect((await missing.exited).code).toBe(2);
    expect(missing.stderr().split('\n')[0]).toBe(`forge start: cannot serve ${join(ROOT, 'nowhere.mjs')}: no such file (--tools and FORGE_TOOLS paths are relative to ${ROOT})`);

    const wrong = npmStart(['--tool', MY_TOOLS], env);
    expect((await wrong.exited).code).toBe(2);
    expect(wrong.stderr()).toMatch(/^forge start: Unknown option '--tool'.*\n\nusage: npm start -- \[--tools MODULE\]/);
  });
});
