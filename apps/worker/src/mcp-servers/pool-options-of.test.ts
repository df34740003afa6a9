import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { MAX_MESSAGE_BYTES, messageBoundFor } from './answer-lines.js';
import { resolveMcpServerPoolOptions } from './pool-options.js';
import { poolOptionsOf } from './pool-options-of.js';
import { SecretValue } from './secret-value.js';
import { loadServersFile } from './servers-file.js';

function load(yaml: string, env: Record<string, string> = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'pool-options-of-'));
  writeFileSync(join(dir, 'servers.yaml'), yaml);
  return loadServersFile(join(dir, 'servers.yaml'), env).servers;
}

describe('poolOptionsOf (a servers file entry as pool options)', () => {
  it("carries the file's instances, session, backoff and crash-loop limits, and reveals env secrets into the server's environment only", () => {
    const [files] = load(
      [
        'version: 1',
        'servers:',
        '  files:',
        '    command: node',
        '    env: { TOKEN: { fromEnv: MY_TOKEN } }',
        '    tier: platform',
        '    instances: { min: 0, max: 3 }',
        '    callsPerInstance: 2',
        '    session: perCaller',
        '    idleMs: 1000',
        '    restartBackoff: { initialMs: 5, maxMs: 50 }',
        '    crashLoop: { failures: 9, windowMs: 2000 }',
      ].join('\n'),
      { MY_TOKEN: 's3cret' },
    );
    const options = resolveMcpServerPoolOptions(poolOptionsOf(files!, { sandbox: true }));
    expect(options).toMatchObject({
      server: 'files',
      session: 'perCaller',
      instances: { min: 0, max: 3, callsPerInstance: 2, idleMs: 1000 },
      restart: { initialDelayMs: 5, maxDelayMs: 50, crashLoopFailures: 9, crashLoopWindowMs: 2000 },
      launch: { command: 'node', env: { TOKEN: 's3cret' }, sandbox: { read: [], write: [] } },
    });
    // Host workers run the same entry unconfined.
    expect('sandbox' in resolveMcpServerPoolOptions(poolOptionsOf(files!, { sandbox: false })).launch).toBe(false);
  });

  it("keeps an HTTP upstream's header secrets wrapped until the request", () => {
    const [remote] = load(['version: 1', 'servers:', '  remote:', '    url: https://mcp.example.com/mcp', '    headers: { Authorization: { fromEnv: AUTH } }'].join('\n'), { AUTH: 'Bearer x' });
    const launch = poolOptionsOf(remote!, { sandbox: false }).launch as { url: string; headers: Record<string, unknown> };
    expect(launch.url).toBe('https://mcp.example.com/mcp');
    expect(launch.headers.Authorization).toBeInstanceOf(SecretValue);
    expect(JSON.stringify(launch)).not.toContain('Bearer x');
  });
  it('gives stdio and HTTP launches the message bound the worker chose, and the default one without', () => {
    const [cmd, web] = load(['version: 1', 'servers:', '  cmd: { command: node }', '  web: { url: "http://127.0.0.1:9/mcp" }'].join('\n'));
    const bound = messageBoundFor(64 * 1024 * 1024);
    expect(bound).toBeGreaterThan(64 * 1024 * 1024);
    for (const config of [cmd!, web!]) {
      expect(resolveMcpServerPoolOptions(poolOptionsOf(config, { sandbox: false, maxMessageBytes: bound })).launch.maxMessageBytes).toBe(bound);
      expect(resolveMcpServerPoolOptions(poolOptionsOf(config, { sandbox: false })).launch.maxMessageBytes).toBe(MAX_MESSAGE_BYTES);
    }
  });
});
