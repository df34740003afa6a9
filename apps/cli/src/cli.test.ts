import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  type ApprovalDecisionRequest,
  type CallView,
  deriveQueueKey,
  parseToolDefinition,
  queueName,
  type QueueStatsList,
  RemoteFleetError,
  TokenVerifier,
  ToolNotFoundError,
} from '@forge-fleet/shared';
import { afterAll, describe, expect, it } from 'vitest';
import { UsageError } from './args.js';
import { reportError, runCli } from './cli.js';
import type { CliContext } from './context.js';
import { DEFAULT_URL, type Endpoint, type FleetApi, resolveEndpoint, UnreachableError, withFleet } from './endpoint.js';
import type { CliEnv } from './env.js';

const dir = mkdtempSync(join(tmpdir(), 'forge-cli-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** An empty state dir: no dev.json unless a test writes one. */
const noDevFile: CliEnv = { FORGE_STATE_DIR: join(dir, 'no-state') };

/** Runs `forge` in-process against `api` (a fake dispatcher); returns what it printed and its exit status. */
async function forge(argv: readonly string[], options: { api?: Partial<FleetApi>; env?: CliEnv } = {}) {
  const out = { stdout: '', stderr: '', endpoints: [] as Endpoint[], closed: 0 };
  const ctx: CliContext = {
    env: options.env ?? noDevFile,
    stdout: { write: (s: string) => (out.stdout += s) },
    stderr: { write: (s: string) => (out.stderr += s), isTTY: false },
    now: () => Date.UTC(2026, 10, 30, 8),
    openFleet: (endpoint) => {
      out.endpoints.push(endpoint);
      return {
        close: () => Promise.resolve(void out.closed++),
        ...options.api,
      } as FleetApi;
    },
  };
  let code: number;
  try {
    code = await runCli(argv, ctx);
  } catch (error) {
    code = reportError(error, ctx.stderr);
  }
  return { ...out, code };
}

describe('forge keys and tokens', () => {
  it('writes keys once, secrets readable by their owner only, and refuses to overwrite them', async () => {
    const first = await forge(['keys', 'init', '--dir', dir]);
    expect(first.code).toBe(0);
    expect(first.stdout).toContain('token.key');
    expect(statSync(join(dir, 'token.key')).mode & 0o777).toBe(0o600);
    expect(statSync(join(dir, 'signing.secret')).mode & 0o777).toBe(0o600);
    await expect(runCli(['keys', 'init', '--dir', dir], { env: noDevFile, stdout: { write: () => true }, stderr: { write: () => true } })).rejects.toMatchObject({
      code: 'CONFIG_INVALID',
      message: expect.stringMatching(/--force/) as string,
    });
    // Existing keys are not a wrong command line: exit 1, not 2.
    expect((await forge(['keys', 'init', '--dir', dir])).code).toBe(1);
  });

  it('derives the worker key of one queue from the signing secret', async () => {
    const secret = Buffer.from(readFileSync(join(dir, 'signing.secret'), 'utf8').trim(), 'base64url');
    const { stdout } = await forge(['keys', 'worker-key', '--secret', join(dir, 'signing.secret'), '--tier', 'host', '--pool', 'payments', '--prefix', 'acme']);
    expect(stdout).toBe(`${deriveQueueKey(secret, queueName('acme', 'host', 'payments')).toString('base64url')}\n`);
    const refused = await forge(['keys', 'worker-key', '--secret', join(dir, 'signing.secret'), '--tier', 'platform', '--pool', 'x']);
    expect(refused).toMatchObject({ code: 2, stderr: expect.stringContaining('--pool applies to --tier host only') as string });
  });

  it('mints a token the fleet verifies, with the given role, task, scope and grants', async () => {
    const { stdout } = await forge(['token', 'mint', '--key', join(dir, 'token.key'), '--sub', 'agent-7', '--role', 'approver', '--task', 'billing', '--scope', 'pay.*, clock', '--grant', 'pay.refund', '--grant', 'pay.void', '--ttl', '600']);
    const claims = await new TokenVerifier(readFileSync(join(dir, 'token.pub'), 'utf8')).verify(stdout.trim());
    expect(claims).toMatchObject({ sub: 'agent-7', role: 'approver', task: 'billing', scope: ['pay.*', 'clock'], grants: ['pay.refund', 'pay.void'] });
    expect(claims.exp - Math.floor(Date.now() / 1000)).toBeLessThanOrEqual(600);
  });

  it('refuses scope and grant patterns the dispatcher would refuse, naming the pattern, before minting anything', async () => {
    for (const [flag, bad] of [['--grant', 'bar_*'], ['--grant', 'db.read_*'], ['--scope', '*.x'], ['--scope', 'with space'], ['--grant', 'a.*.b']] as const) {
      const run = await forge(['token', 'mint', '--key', join(dir, 'token.key'), '--sub', 'a', flag, `ok.*, ${bad}`]);
      expect(run.code, bad).toBe(2);
      expect(run.stdout, bad).toBe('');
      expect(run.stderr.split('\n')[0], bad).toBe(
        `forge token mint: ${flag}: tool pattern ${JSON.stringify(bad)} is not an exact tool name, "prefix.*" or "*"${bad.includes('*') ? `; "*" stands alone or ends a pattern after a dot ("db.*" covers db.read and db.write); else list the exact names (${flag} a,b)` : ''}`,
      );
    }
    // What the dispatcher accepts, this accepts: exact names, `prefix.*` and `*`.
    const { code, stdout } = await forge(['token', 'mint', '--key', join(dir, 'token.key'), '--sub', 'a', '--scope', '*', '--grant', 'db.*, http_get, my-tool.v2']);
    expect(code).toBe(0);
    expect(await new TokenVerifier(readFileSync(join(dir, 'token.pub'), 'utf8')).verify(stdout.trim())).toMatchObject({ scope: ['*'], grants: ['db.*', 'http_get', 'my-tool.v2'] });
  });

  it('refuses bad arguments with CONFIG_INVALID, exit status 2 and the usage; an unusable key file is exit status 1', async () => {
    const cases = [
      ['token', 'mint', '--sub', 'a'],
      ['token', 'mint', '--key', join(dir, 'token.key'), '--sub', 'a', '--role', 'root'],
      ['token', 'mint', '--key', join(dir, 'token.key'), '--sub', 'a', '--ttl', '-1'],
      ['keys', 'rotate'],
      ['keys'],
      ['token', 'mint', '--bogus'],
      ['teleport'],
    ];
    for (const argv of cases) {
      await expect(runCli(argv, { env: noDevFile, stdout: { write: () => true }, stderr: { write: () => true } }), argv.join(' ')).rejects.toBeInstanceOf(UsageError);
      const run = await forge(argv);
      expect(run.code, argv.join(' ')).toBe(2);
      expect(run.stderr, argv.join(' ')).toContain('usage:');
    }
    const notAKey = await forge(['token', 'mint', '--key', join(dir, 'token.pub'), '--sub', 'a']);
    expect(notAKey).toMatchObject({ code: 1, stderr: expect.stringContaining('CONFIG_INVALID') as string });
  });
});

describe('forge help', () => {
  it('lists every command with --help, and one group with `forge <command> --help`', async () => {
    const all = await forge(['--help']);
    expect(all.code).toBe(0);
    for (const command of ['forge tools', 'forge call', 'forge approvals approve', 'forge approvals deny', 'forge approvals modify', 'forge queues', 'forge keys init', 'forge token mint', '--url', '--token', '--json']) {
      expect(all.stdout).toContain(command);
    }
    const call = await forge(['call', '--help']);
    expect(call).toMatchObject({ code: 0, stdout: expect.stringContaining('--timeout') as string });
    expect(call.stdout).not.toContain('forge token mint');
    const approvals = await forge(['approvals', 'deny', '--help']);
    expect(approvals.stdout).toContain('forge approvals modify');
    expect((await forge(['keys', '--help'])).stdout).toContain('forge keys worker-key');
    // Help needs nothing else to be right, and talks to no dispatcher.
    expect((await forge(['approvals', 'modify', '-h'])).endpoints).toEqual([]);
  });
});

const tools = [parseToolDefinition({ name: 'echo', tier: 'platform', retryable: true, description: 'Echoes.' }), parseToolDefinition({ name: 'refund', tier: 'host', pool: 'payments', requiresConfirmation: true })];

describe('forge tools, approvals and queues', () => {
  it('prints the tool catalog as a table, or the API answer with --json', async () => {
    const api = { tools: () => Promise.resolve(tools) };
    const human = await forge(['tools'], { api });
    expect(human.code).toBe(0);
    expect(human.stdout.split('\n')[1]).toMatch(/^echo\s+platform\s+-\s+retryable\s+Echoes\.$/);
    expect(human.stdout.split('\n')[2]).toMatch(/^refund\s+host\s+payments\s+requiresConfirmation\s+-$/);
    expect(human.closed).toBe(1);
    const json = await forge(['tools', '--json'], { api });
    expect(JSON.parse(json.stdout)).toEqual({ tools });
  });

  it('lists pending approvals and sends decisions: approve, deny with a reason, modify with JSON arguments', async () => {
    const now = Date.UTC(2026, 10, 30, 8);
    const decisions: [string, ApprovalDecisionRequest][] = [];
    const api: Partial<FleetApi> = {
      approvals: () => Promise.resolve([{ id: 'c-1', tool: 'refund', arguments: { amount: 120 }, caller: 'agent-7', scope: 'billing', reason: 'needs a person', deadline: now + 90_000, createdAt: now }]),
      decide: (id, decision) => {
        decisions.push([id, decision]);
        return Promise.resolve<CallView>(decision.decision === 'deny' ? { id, status: 'failed' } : { id, status: 'queued' });
      },
    };
    expect((await forge(['approvals'], { api })).stdout).toMatch(/\nc-1\s+refund\s+\{"amount":120\}\s+agent-7\s+billing\s+needs a person\s+in 1m30s\n$/);
    expect((await forge(['approvals', 'approve', 'c-1'], { api })).stdout).toBe('approved c-1: queued\n');
    expect((await forge(['approvals', 'deny', 'c-1', '--reason', 'not now'], { api })).stdout).toBe('denied c-1: failed\n');
    const modified = await forge(['approvals', 'modify', 'c-1', '{"amount": 100}', '--reason', 'capped', '--json'], { api });
    expect(JSON.parse(modified.stdout)).toEqual({ id: 'c-1', status: 'queued' });
    expect(decisions).toEqual([
      ['c-1', { decision: 'approve' }],
      ['c-1', { decision: 'deny', reason: 'not now' }],
      ['c-1', { decision: 'modify', arguments: { amount: 100 }, reason: 'capped' }],
    ]);
  });

  it('refuses a denial without a reason, an edit that is not a JSON object, and a bad call id, before sending anything', async () => {
    const api: Partial<FleetApi> = { decide: () => Promise.reject(new Error('must not be called')) };
    const noReason = await forge(['approvals', 'deny', 'c-1'], { api });
    expect(noReason).toMatchObject({ code: 2, stderr: expect.stringContaining('--reason is required') as string });
    const notObject = await forge(['approvals', 'modify', 'c-1', '[1]'], { api });
    expect(notObject).toMatchObject({ code: 2, stderr: expect.stringContaining('must be a JSON object') as string });
    const badId = await forge(['approvals', 'approve', 'has space'], { api });
    expect(badId).toMatchObject({ code: 2, stderr: expect.stringContaining("call id 'has space'") as string });
    expect((await forge(['approvals', 'approve'], { api })).code).toBe(2);
  });

  it('prints queue statistics as a table, or the API answer with --json', async () => {
    const stats: QueueStatsList = { at: 1, queues: [{ lane: 'platform', tier: 'platform', queue: '{forge.platform}.p1', pack: 'p1', tools: ['echo'], waiting: 2, active: 1, delayed: 0, failed: 0, workers: 3, calls: { waiting: 70, active: 4 } }] };
    const api = { queues: () => Promise.resolve(stats) };
    expect((await forge(['queues'], { api })).stdout).toMatch(/\nplatform\s+\{forge\.platform\}\.p1\s+2\s+1\s+0\s+0\s+3\s+70\s+4\s+echo\n$/);
    expect(JSON.parse((await forge(['queues', '--json'], { api })).stdout)).toEqual(stats);
  });
});

describe('forge call', () => {
  const submitOnly = (record: unknown[]): Partial<FleetApi> => ({
    submit: (name, args, options) => {
      record.push({ name, args, options });
      return Promise.resolve<CallView>({ id: options?.id ?? 'generated', status: 'queued' });
    },
  });

  it('submits the tool with its JSON arguments and chosen id', async () => {
    const submitted: unknown[] = [];
    const run = await forge(['call', 'echo', '{"n": 1}', '--id', 'step-7'], { api: submitOnly(submitted) });
    expect(run).toMatchObject({ code: 0, stdout: 'step-7 queued\n' });
    expect(submitted).toEqual([{ name: 'echo', args: { n: 1 }, options: { id: 'step-7' } }]);
    await forge(['call', 'clock'], { api: submitOnly(submitted) });
    expect(submitted[1]).toEqual({ name: 'clock', args: {}, options: {} });
  });

  it('refuses invalid JSON, a non-object, a bad --timeout and --timeout without --wait with exit status 2, sending nothing', async () => {
    const submitted: unknown[] = [];
    const cases: [string[], RegExp][] = [
      [['call', 'echo', '{"n":'], /arguments are not valid JSON/],
      [['call', 'echo', '"text"'], /must be a JSON object.*not a string/],
      [['call', 'echo', '{}', '--wait', '--timeout', 'soon'], /--timeout must be a positive number of seconds/],
      [['call', 'echo', '{}', '--timeout', '5'], /--timeout bounds --wait/],
      [['call'], /missing arguments/],
      [['call', 'echo', '{}', 'extra'], /unexpected argument 'extra'/],
      [['call', 'echo', '--bogus'], /Unknown option '--bogus'/],
    ];
    for (const [argv, message] of cases) {
      const run = await forge(argv, { api: submitOnly(submitted) });
      expect(run.code, argv.join(' ')).toBe(2);
      expect(run.stderr, argv.join(' ')).toMatch(message);
      expect(run.stderr).toContain('usage:');
    }
    expect(submitted).toEqual([]);
  });

  it('prints a refusal as its code and message, exit status 1, no stack trace', async () => {
    const run = await forge(['call', 'teleport'], { api: { submit: () => Promise.reject(new ToolNotFoundError('teleport')) } });
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/^forge: TOOL_NOT_FOUND: .*teleport.*\n$/);
    expect(run.stderr).not.toMatch(/\n\s+at /);
  });
});

describe('where fleet commands connect', () => {
  const stateDir = join(dir, 'state');
  mkdirSync(stateDir, { recursive: true });
  writeFileSync(join(stateDir, 'dev.json'), JSON.stringify({ url: 'http://127.0.0.1:9999', token: 'dev-token', limitedToken: 'x', adminToken: 'admin-token' }));
  const withDev: CliEnv = { FORGE_STATE_DIR: stateDir };

  it('takes --url and --token first, then FORGE_URL and FORGE_TOKEN, then dev.json, then the default', () => {
    expect(resolveEndpoint({}, noDevFile, 'forge tools', '')).toEqual({ url: DEFAULT_URL });
    expect(resolveEndpoint({}, withDev, 'forge tools', '')).toEqual({ url: 'http://127.0.0.1:9999', token: 'dev-token' });
    expect(resolveEndpoint({}, { ...withDev, FORGE_URL: 'http://fleet:8080', FORGE_TOKEN: 'env-token' }, 'forge tools', '')).toEqual({ url: 'http://fleet:8080', token: 'env-token' });
    expect(resolveEndpoint({ url: 'https://other', token: 'flag-token' }, { ...withDev, FORGE_TOKEN: 'env-token' }, 'forge tools', '')).toEqual({ url: 'https://other', token: 'flag-token' });
  });

  it("uses the dev fleet's admin token for the operator commands, its agent token for the others", () => {
    expect(resolveEndpoint({}, withDev, 'forge approvals', '')).toEqual({ url: 'http://127.0.0.1:9999', token: 'admin-token' });
    // Deciding is an operator's too: after `npm start`, approve/deny/modify use the dev admin token.
    for (const decide of ['approve', 'deny', 'modify']) expect(resolveEndpoint({}, withDev, `forge approvals ${decide}`, '')).toMatchObject({ token: 'admin-token' });
    expect(resolveEndpoint({}, withDev, 'forge queues', '')).toEqual({ url: 'http://127.0.0.1:9999', token: 'admin-token' });
    expect(resolveEndpoint({}, withDev, 'forge call', '')).toEqual({ url: 'http://127.0.0.1:9999', token: 'dev-token' });
  });

  it('sends the dev token only to the fleet that wrote it', () => {
    expect(resolveEndpoint({ url: 'http://elsewhere:8080' }, withDev, 'forge tools', '')).toEqual({ url: 'http://elsewhere:8080' });
    expect(resolveEndpoint({ url: 'http://127.0.0.1:9999' }, withDev, 'forge tools', '')).toEqual({ url: 'http://127.0.0.1:9999', token: 'dev-token' });
  });

  it('refuses a URL that is not http(s) as a usage error, and a dev.json that is not one as a setting error', async () => {
    expect((await forge(['tools', '--url', 'ftp://x'])).code).toBe(2);
    expect((await forge(['tools', '--url', 'not a url'])).stderr).toContain("--url 'not a url' is not a URL");
    const broken = join(dir, 'broken');
    mkdirSync(broken, { recursive: true });
    writeFileSync(join(broken, 'dev.json'), '{ not json');
    const run = await forge(['tools'], { env: { FORGE_STATE_DIR: broken } });
    expect(run).toMatchObject({ code: 1, stderr: expect.stringContaining('CONFIG_INVALID') as string });
  });

  it('opens the client on the chosen endpoint and closes it afterwards', async () => {
    const run = await forge(['tools', '--token', 't0'], { api: { tools: () => Promise.resolve([]) }, env: withDev });
    expect(run.endpoints).toEqual([{ url: 'http://127.0.0.1:9999', token: 't0' }]);
    expect(run.closed).toBe(1);
  });

  it('turns a network failure into "cannot reach", closing the client; fleet errors pass through', async () => {
    let closed = 0;
    const open = (): FleetApi => ({ close: () => Promise.resolve(void closed++) }) as FleetApi;
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' });
    const failure = withFleet({ url: 'http://127.0.0.1:1' }, open, () => Promise.reject(refused));
    await expect(failure).rejects.toBeInstanceOf(UnreachableError);
    await expect(failure).rejects.toThrow(/cannot reach the dispatcher at http:\/\/127\.0\.0\.1:1 \(connect ECONNREFUSED/);
    const forbidden = new RemoteFleetError('FORBIDDEN', 'approver role needed');
    await expect(withFleet({ url: 'http://x' }, open, () => Promise.reject(forbidden))).rejects.toBe(forbidden);
    expect(closed).toBe(2);
    const lines: string[] = [];
    expect(reportError(forbidden, { write: (s: string) => lines.push(s) })).toBe(1);
    expect(lines).toEqual(['forge: FORBIDDEN: approver role needed\n']);
  });
});
