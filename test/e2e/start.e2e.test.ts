import { type ChildProcessByStdio, type ChildProcessWithoutNullStreams, spawn, spawnSync } from 'node:child_process';
import type { Readable } from 'node:stream';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '@forge-fleet/local-redis';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT } from '../fixtures/fleet.js';
import { allProcesses } from '../fixtures/mcp/processes.js';

/**
 * The README's start command, run as a person would: `npm start` with no
 * REDIS_URL (so it starts its own redis-server), then calls over HTTP, the
 * demo agent, and Ctrl-C.
 */
describe('npm start', () => {
  const stateDir = mkdtempSync(join(tmpdir(), 'forge-e2e-'));
  afterAll(() => rmSync(stateDir, { recursive: true, force: true }));

  it('starts a fleet on an embedded Redis, serves calls of every tier, runs the demo, and stops cleanly', async () => {
    const port = await freePort();
    const env: NodeJS.ProcessEnv = { ...process.env, PORT: String(port), FORGE_STATE_DIR: stateDir, FORCE_COLOR: '0' };
    delete env.REDIS_URL;
    // Its own process group, so the test can press "Ctrl-C" the way a terminal does: to the whole group.
    const proc = spawn('npm', ['start', '--silent'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => proc.once('exit', (code, signal) => resolve({ code, signal })));
    const output = outputOf(proc, exited);
    try {
      await output.banner;
      expect(output.text()).toMatch(/started redis-server at redis:\/\/127\.0\.0\.1:\d+/);
      const { url, token, limitedToken } = JSON.parse(readFileSync(join(stateDir, 'dev.json'), 'utf8')) as { url: string; token: string; limitedToken: string };
      expect(url).toBe(`http://127.0.0.1:${port}`);
      expect(output.text()).toContain(`export FORGE_TOKEN=${token}`);

      // `null` sends no token at all.
      const post = async (body: unknown, bearer: string | null = token) => {
        const auth: Record<string, string> = bearer === null ? {} : { authorization: `Bearer ${bearer}` };
        const res = await fetch(`${url}/v1/calls?wait=10000`, { method: 'POST', headers: { 'content-type': 'application/json', ...auth }, body: JSON.stringify(body) });
        return { status: res.status, body: (await res.json()) as { status?: string; result?: { content: string; isError: boolean }; error?: { code: string } } };
      };
      const clock = await post({ name: 'clock', arguments: {} });
      expect(clock.status).toBe(200);
      expect(clock.body.result?.content).toMatch(/^\d{4}-\d{2}-\d{2}T/);
      expect((await post({ name: 'wasm_add', arguments: { a: 2, b: 40 } })).body.result?.content).toBe('{"sum":42}');
      expect(await post({ name: 'clock', arguments: {} }, null)).toMatchObject({ status: 401, body: { error: { code: 'UNAUTHENTICATED' } } });
      const hostDenied = await post({ name: 'http_get', arguments: { url: `${url}/healthz` } }, limitedToken);
      expect(hostDenied).toMatchObject({ status: 403, body: { error: { code: 'APPROVAL_DENIED' } } });
      const host = await post({ name: 'http_get', arguments: { url: `${url}/healthz` } });
      expect(host.body.result?.content).toBe('{"status":200,"body":"{\\"ok\\":true}"}');

      const demo = spawnSync('npm', ['run', 'demo', '--silent'], { cwd: ROOT, env: { ...env, FORGE_STATE_DIR: stateDir }, encoding: 'utf8' });
      expect(demo.status, demo.stderr).toBe(0);
      expect(demo.stdout).toMatch(/platform {2}clock\s+\d{4}-/);
      expect(demo.stdout).toMatch(/embedded {2}wasm_add\s+\{"sum":42\}/);
      expect(demo.stdout).toMatch(/embedded {2}word_count \(WASI\)\s+\{"words":4\}/);
      expect(demo.stdout).toMatch(/host {6}http_get\s+\{"status":200/);
      expect(demo.stdout).toMatch(/refused {3}bad arguments\s+refused SCHEMA_VALIDATION \(HTTP 422\)/);
      expect(demo.stdout).toMatch(/refused {3}host, no grant\s+refused APPROVAL_DENIED \(HTTP 403\)/);
      expect(demo.stdout).toContain('same call, same result');
    } finally {
      // Stop it if it still runs; if it already exited, the failure above is what matters, not ESRCH.
      try {
        process.kill(-proc.pid!, 'SIGINT');
      } catch {
        // already gone
      }
    }
    // npm re-raises the Ctrl-C it got once its script has exited; the script itself stopped in order.
    const { code, signal } = await exited;
    expect(code === 0 || signal === 'SIGINT', `exit ${code} / ${signal}`).toBe(true);
    expect(output.text()).toContain('Forge Fleet: stopped.');
    expect(output.text()).not.toContain('exited (');
    // Everything it started is gone: the port is free again.
    await expect(fetch(`http://127.0.0.1:${port}/healthz`)).rejects.toThrow();
  });

  it('leaves nothing behind when its own process (not its group) gets Ctrl-C twice: the second hurries the processes, it still waits for them', async () => {
    const port = await freePort();
    const state = mkdtempSync(join(tmpdir(), 'forge-e2e-twice-'));
    const env: NodeJS.ProcessEnv = { ...process.env, PORT: String(port), FORGE_STATE_DIR: state, FORCE_COLOR: '0' };
    delete env.REDIS_URL;
    const proc = spawn(process.execPath, ['scripts/start.mjs'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
    const output = outputOf(proc, exited);
    try {
      await output.banner;
      const started = allProcesses().filter((p) => p.ppid === proc.pid).map((p) => p.pid);
      expect(started.length).toBeGreaterThanOrEqual(3);
      // Two signals to it alone, as `kill -INT <pid>` twice (or a supervisor that signals the process, not the group).
      proc.kill('SIGINT');
      await new Promise((resolve) => setTimeout(resolve, 100));
      proc.kill('SIGINT');
      expect(await exited).toBe(0);
      expect(output.text()).toContain('Forge Fleet: stopped.');
      // None left running (a zombie waiting for a parent that is gone counts as gone).
      expect(allProcesses().filter((p) => started.includes(p.pid) && p.state !== 'Z')).toEqual([]);
    } finally {
      try {
        process.kill(-proc.pid!, 'SIGKILL');
      } catch {
        // already gone
      }
      rmSync(state, { recursive: true, force: true });
    }
  });
});

/** What a start process prints, as it comes, and its banner's last line (the start is over), or its exit before it. */
function outputOf(proc: ChildProcessWithoutNullStreams | ChildProcessByStdio<null, Readable, Readable>, exited: Promise<unknown>): { text: () => string; banner: Promise<void> } {
  let out = '';
  const banner = new Promise<void>((resolve, reject) => {
    const onData = (d: Buffer): void => {
      out += d.toString();
      if (out.includes('Ctrl-C stops the fleet.')) resolve();
    };
    proc.stdout.on('data', onData);
    proc.stderr.on('data', onData);
    void exited.then((how) => reject(new Error(`the start exited (${JSON.stringify(how)}) before its banner:\n${out}`)));
  });
  return { text: () => out, banner };
}

