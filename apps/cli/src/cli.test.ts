import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { deriveQueueKey, queueName, TokenVerifier } from '@forge-fleet/shared';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli } from './cli.js';

const dir = mkdtempSync(join(tmpdir(), 'forge-cli-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('forge keys and tokens', () => {
  it('writes keys once, secrets readable by their owner only, and refuses to overwrite them', async () => {
    expect(await runCli(['keys', 'init', '--dir', dir])).toContain('token.key');
    expect(statSync(join(dir, 'token.key')).mode & 0o777).toBe(0o600);
    expect(statSync(join(dir, 'signing.secret')).mode & 0o777).toBe(0o600);
    await expect(runCli(['keys', 'init', '--dir', dir])).rejects.toMatchObject({ code: 'CONFIG_INVALID', message: expect.stringMatching(/--force/) as string });
  });

  it('derives the worker key of one queue from the signing secret', async () => {
    const secret = Buffer.from(readFileSync(join(dir, 'signing.secret'), 'utf8').trim(), 'base64url');
    const key = await runCli(['keys', 'worker-key', '--secret', join(dir, 'signing.secret'), '--tier', 'host', '--pool', 'payments', '--prefix', 'acme']);
    expect(key).toBe(deriveQueueKey(secret, queueName('acme', 'host', 'payments')).toString('base64url'));
    await expect(runCli(['keys', 'worker-key', '--secret', join(dir, 'signing.secret'), '--tier', 'platform', '--pool', 'x'])).rejects.toMatchObject({ code: 'CONFIG_INVALID' });
  });

  it('mints a token the fleet verifies, with the given role, task, scope and grants', async () => {
    const token = await runCli(['token', 'mint', '--key', join(dir, 'token.key'), '--sub', 'agent-7', '--role', 'approver', '--task', 'billing', '--scope', 'pay.*, clock', '--grant', 'pay.refund', '--ttl', '600']);
    const claims = await new TokenVerifier(readFileSync(join(dir, 'token.pub'), 'utf8')).verify(token);
    expect(claims).toMatchObject({ sub: 'agent-7', role: 'approver', task: 'billing', scope: ['pay.*', 'clock'], grants: ['pay.refund'] });
    expect(claims.exp - Math.floor(Date.now() / 1000)).toBeLessThanOrEqual(600);
  });

  it('refuses bad arguments with CONFIG_INVALID and the usage', async () => {
    const cases = [
      ['token', 'mint', '--sub', 'a'],
      ['token', 'mint', '--key', join(dir, 'token.key'), '--sub', 'a', '--role', 'root'],
      ['token', 'mint', '--key', join(dir, 'token.pub'), '--sub', 'a'],
      ['token', 'mint', '--key', join(dir, 'token.key'), '--sub', 'a', '--ttl', '-1'],
      ['keys', 'rotate'],
      ['token', 'mint', '--bogus'],
    ];
    for (const argv of cases) await expect(runCli(argv), argv.join(' ')).rejects.toMatchObject({ code: 'CONFIG_INVALID' });
    expect(await runCli(['--help'])).toContain('forge token mint');
  });
});
