import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { QueueStatsList, ToolDefinition } from '@forge-fleet/shared';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, TestFleet } from '../fixtures/fleet.js';
import { redisUrl } from '../fixtures/redis.js';

/** The `forge` bin, run from its TypeScript source (bin/forge.js imports the package by name; see its comment). */
const FORGE_BIN = join(ROOT, 'apps', 'cli', 'bin', 'forge.js');

/** A `forge` process: what it printed so far, and how it ended. */
interface ForgeRun {
  readonly proc: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** Resolves once stderr contains `text`; rejects if the process ends first. */
  stderrShows(text: string): Promise<void>;
  readonly ended: Promise<{ code: number | null; stdout: string; stderr: string }>;
}

/**
 * The real `forge` command line against a running fleet: the bin as a child
 * process (stderr is a pipe, so the status line of `--wait` comes one line per
 * change), talking HTTP to a dispatcher that requires tokens.
 */
describe('the forge CLI against a running fleet', () => {
  const fleet = new TestFleet();
  // No dev.json unless a test writes one: the developer's own .forge/ must not leak in.
  const stateDir = mkdtempSync(join(tmpdir(), 'forge-cli-int-'));
  const running: ForgeRun[] = [];
  let url: string;
  let agent: string;
  let approver: string;
  let redis: Redis;

  function start(args: readonly string[], env: Record<string, string> = {}): ForgeRun {
    const base: NodeJS.ProcessEnv = { ...process.env, FORGE_STATE_DIR: stateDir };
    delete base.FORGE_URL;
    delete base.FORGE_TOKEN;
    const proc = spawn(process.execPath, ['--conditions=forge-source', '--import', 'tsx', FORGE_BIN, ...args], { cwd: ROOT, env: { ...base, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    const waiters: { text: string; resolve: () => void }[] = [];
    proc.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    proc.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
      for (const w of waiters.filter((w) => stderr.includes(w.text))) w.resolve();
    });
    const ended = new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => proc.once('close', (code) => resolve({ code, stdout, stderr })));
    const run: ForgeRun = {
      proc,
      stdout: () => stdout,
      stderr: () => stderr,
      stderrShows: (text) =>
        new Promise<void>((resolve, reject) => {
          if (stderr.includes(text)) return resolve();
          waiters.push({ text, resolve });
          void ended.then(({ code }) => reject(new Error(`forge ${args.join(' ')} exited (${code}) before printing '${text}':\n${stderr}`)));
        }),
      ended,
    };
    running.push(run);
    return run;
  }

  /** Runs `forge` to its end as the given token holder (through FORGE_URL and FORGE_TOKEN). */
  const forge = (args: readonly string[], token: string) => start(args, { FORGE_URL: url, FORGE_TOKEN: token }).ended;

  const started = (id: string) => redis.blpop(`${fleet.prefix}:test:started:{${id}}`, 20);
  const release = (id: string) => redis.lpush(`${fleet.prefix}:test:release:{${id}}`, '1');

  beforeAll(async () => {
    redis = new Redis(redisUrl());
    await fleet.worker({ tier: 'platform', env: { FORGE_PROGRESS_INTERVAL_MS: '20' } });
    ({ url } = await fleet.dispatcher({ FORGE_DEV_MODE: '0' }));
    agent = await fleet.token({ subject: 'cli-agent' });
    approver = await fleet.token({ subject: 'cli-approver', role: 'approver' });
  });

  afterAll(async () => {
    for (const run of running) if (run.proc.exitCode === null && run.proc.signalCode === null) run.proc.kill('SIGKILL');
    redis?.disconnect();
    await fleet.stopAll();
    rmSync(stateDir, { recursive: true, force: true });
  });

  it('lists the live tools: --json gives the API answer, the table a line per tool', async () => {
    const json = await forge(['tools', '--json'], agent);
    expect(json.code, json.stderr).toBe(0);
    const { tools } = JSON.parse(json.stdout) as { tools: ToolDefinition[] };
    expect(tools.find((t) => t.name === 'echo')).toMatchObject({ tier: 'platform', retryable: false });
    const table = await forge(['tools'], agent);
    expect(table.stdout).toMatch(/^echo\s+platform\s+-\s+-\s+-$/m);
    expect(table.stdout).toMatch(/^confirm_echo\s+platform\s+-\s+requiresConfirmation\s+Needs a person/m);
  });

  it('calls a tool and waits for it: prints the structured result and exits 0', async () => {
    const run = await start(['call', 'echo', '{"n":1}', '--wait', '--url', url, '--token', agent]).ended;
    expect(run.code, run.stderr).toBe(0);
    expect(JSON.parse(run.stdout)).toMatchObject({ echo: { n: 1 } });
    expect(run.stderr).toMatch(/ · completed · /);
  });

  it('exits 1 with the error code for a call that fails and for a call the fleet refuses, with no stack trace', async () => {
    const failed = await forge(['call', 'slow', '{}', '--wait'], agent);
    expect(failed.code).toBe(1);
    expect(failed.stderr).toMatch(/^forge: EXECUTION_TIMEOUT: /m);
    const refused = await forge(['call', 'no_such_tool', '{}', '--wait'], agent);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/^forge: TOOL_NOT_FOUND: .*no_such_tool/m);
    const invalid = await forge(['call', 'count', '{"n":"one"}'], agent);
    expect(invalid.code).toBe(1);
    expect(invalid.stderr).toMatch(/^forge: SCHEMA_VALIDATION: /m);
    for (const run of [failed, refused, invalid]) expect(run.stderr).not.toMatch(/\n\s+at /);
  });

  it('exits 2 for arguments that are not JSON, saying so, and sends nothing', async () => {
    const id = `bad-json-${randomUUID()}`;
    const run = await forge(['call', 'echo', '{"n":', '--id', id, '--wait'], agent);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/^forge call: arguments are not valid JSON/);
    expect(run.stderr).toContain("forge call TOOL ['JSON']");
    expect(run.stdout).toBe('');
    // Had anything been submitted under that id, this would be the same call, with its result.
    const fresh = await forge(['call', 'echo', '{"fresh":true}', '--id', id, '--wait'], agent);
    expect(JSON.parse(fresh.stdout)).toMatchObject({ echo: { fresh: true } });
  });

  it('lists a call waiting for a person, approves it, and the waiting `forge call` gets its result', async () => {
    const id = `cli-approve-${randomUUID()}`;
    const waiting = start(['call', 'confirm_echo', '{"text":"hi"}', '--wait', '--id', id], { FORGE_URL: url, FORGE_TOKEN: agent });
    await waiting.stderrShows('awaiting_approval');
    const list = await forge(['approvals'], approver);
    expect(list.code, list.stderr).toBe(0);
    expect(list.stdout).toMatch(new RegExp(`^${id}\\s+confirm_echo\\s+\\{"text":"hi"\\}\\s+cli-agent\\s+default\\s+.*confirm.*\\s+in \\d+m\\d{2}s$`, 'm'));
    const json = JSON.parse((await forge(['approvals', '--json'], approver)).stdout) as { approvals: { id: string; arguments: unknown }[] };
    expect(json.approvals.find((a) => a.id === id)?.arguments).toEqual({ text: 'hi' });
    // An edit is held to the input limits a submission is, with its answer; the call keeps waiting as it was.
    const edit = await forge(['approvals', 'modify', id, '{"text":"hi","constructor":{}}'], approver);
    expect(edit.code).toBe(1);
    expect(edit.stderr).toMatch(/^forge: BAD_REQUEST: .*arguments may not use the key 'constructor'/m);
    const approve = await forge(['approvals', 'approve', id, '--reason', 'looks fine'], approver);
    expect(approve).toMatchObject({ code: 0, stdout: `approved ${id}: queued\n` });
    const outcome = await waiting.ended;
    expect(outcome.code, outcome.stderr).toBe(0);
    expect(JSON.parse(outcome.stdout)).toEqual({ echo: 'hi', runs: 1 });
    expect((await forge(['approvals', 'approve', id], approver)).stderr).toMatch(/^forge: NOT_AWAITING_APPROVAL: /m);
  });

  it('shows the platform queue with its live worker, and a running call as an active job; agents may not look', async () => {
    const json = await forge(['queues', '--json'], approver);
    expect(json.code, json.stderr).toBe(0);
    const platform = (JSON.parse(json.stdout) as QueueStatsList).queues.find((q) => q.lane === 'platform');
    // The queue of the worker's tool pack: the lane's hash tag, then the pack id.
    expect(platform).toMatchObject({ tier: 'platform', queue: expect.stringMatching(new RegExp(`^\\{${fleet.prefix}\\.platform\\}\\.[0-9a-f]{15}$`)) as unknown });
    expect(platform!.tools).toContain('gated');
    expect(platform!.workers).toBeGreaterThanOrEqual(1);

    const id = `cli-gated-${randomUUID()}`;
    expect((await forge(['call', 'gated', '{}', '--id', id], agent)).stdout).toMatch(new RegExp(`^${id} (queued|running)\\n$`));
    expect(await started(id)).not.toBeNull();
    const busy = await forge(['queues'], approver);
    // Jobs (waiting, active ≥ 1, delayed, failed), workers ≥ 1, then calls (waiting, active ≥ 1) and the pack's tools.
    expect(busy.stdout).toMatch(new RegExp(`^platform\\s+\\{${fleet.prefix}\\.platform\\}\\.[0-9a-f]{15}\\s+\\d+\\s+[1-9]\\d*\\s+\\d+\\s+\\d+\\s+[1-9]\\d*\\s+\\d+\\s+[1-9]\\d*\\s+block,`, 'm'));
    await release(id);
    // The same id again is the same call: waiting on it prints its result.
    const again = await forge(['call', 'gated', '{}', '--id', id, '--wait'], agent);
    expect(JSON.parse(again.stdout)).toMatchObject({ released: true });

    const refused = await forge(['queues'], agent);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/^forge: FORBIDDEN: /m);
  });

  it("shows the tool's own progress on stderr while waiting, step by step", async () => {
    const id = `cli-stepped-${randomUUID()}`;
    const run = start(['call', 'stepped', '{"steps":2}', '--wait', '--id', id], { FORGE_URL: url, FORGE_TOKEN: agent });
    await run.stderrShows('1/2 (50%) step 1');
    await release(id);
    await run.stderrShows('2/2 (100%) step 2');
    await release(id);
    const outcome = await run.ended;
    expect(outcome.code, outcome.stderr).toBe(0);
    expect(JSON.parse(outcome.stdout)).toEqual({ steps: 2 });
    const lines = outcome.stderr.split('\n');
    const step = (n: number) => lines.findIndex((line) => line.startsWith(`call ${id} · running · ${n}/2 (${n * 50}%) step ${n} · `));
    expect(step(1)).toBeGreaterThanOrEqual(0);
    expect(step(2)).toBeGreaterThan(step(1));
    expect(lines.findIndex((line) => line.startsWith(`call ${id} · completed · `))).toBeGreaterThan(step(2));
  });

  it('finds the fleet and token `npm start` wrote to dev.json when given neither', async () => {
    const devState = join(stateDir, 'dev');
    mkdirSync(devState, { recursive: true });
    writeFileSync(join(devState, 'dev.json'), JSON.stringify({ url, token: agent }));
    const run = await start(['tools', '--json'], { FORGE_STATE_DIR: devState }).ended;
    expect(run.code, run.stderr).toBe(0);
    expect((JSON.parse(run.stdout) as { tools: ToolDefinition[] }).tools.map((t) => t.name)).toContain('echo');
  });
});
