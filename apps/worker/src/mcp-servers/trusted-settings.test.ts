import { mkdtempSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { describe, expect, it } from 'vitest';
import { revealAll } from './secret-value.js';
import { loadServersFile, type StdioTransport } from './servers-file.js';
import { trustedSettings } from './trusted-settings.js';

const UNTRUSTED = { retryable: false, speculatable: false, requiresConfirmation: false, timeoutMs: undefined, approvalDeadlineMs: undefined };
const EVERY_LOOSENING_HINT = { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false };

describe('trustedSettings', () => {
  it('lets no hint loosen anything: read-only, idempotent and closed-world claims change nothing', () => {
    expect(trustedSettings(EVERY_LOOSENING_HINT, undefined)).toEqual(UNTRUSTED);
    expect(trustedSettings({ readOnlyHint: true }, undefined)).toEqual(UNTRUSTED);
    expect(trustedSettings({ idempotentHint: true }, undefined)).toEqual(UNTRUSTED);
    expect(trustedSettings({ openWorldHint: false }, undefined)).toEqual(UNTRUSTED);
    expect(trustedSettings(undefined, undefined)).toEqual(UNTRUSTED);
  });

  it('lets an explicit destructiveHint ask for a person, even beside readOnlyHint', () => {
    expect(trustedSettings({ destructiveHint: true }, undefined).requiresConfirmation).toBe(true);
    expect(trustedSettings({ destructiveHint: true, readOnlyHint: true }, undefined).requiresConfirmation).toBe(true);
    // MCP's default for an absent destructiveHint is true; acting on it would put a person before every tool.
    expect(trustedSettings({}, undefined).requiresConfirmation).toBe(false);
    // Hints that are not booleans are not hints.
    expect(trustedSettings({ destructiveHint: 'true' }, undefined).requiresConfirmation).toBe(false);
    expect(trustedSettings('destructive', undefined)).toEqual(UNTRUSTED);
  });

  it('takes the file over every hint, in both directions', () => {
    expect(trustedSettings(EVERY_LOOSENING_HINT, { retryable: true, speculatable: true, timeoutMs: 5000, approvalDeadlineMs: 60_000 })).toEqual({
      retryable: true,
      speculatable: true,
      requiresConfirmation: false,
      timeoutMs: 5000,
      approvalDeadlineMs: 60_000,
    });
    expect(trustedSettings({ destructiveHint: true }, { requiresConfirmation: false }).requiresConfirmation).toBe(false);
    expect(trustedSettings(EVERY_LOOSENING_HINT, { requiresConfirmation: true }).requiresConfirmation).toBe(true);
  });

  it('derives settings for a real server\'s tools, started from what its servers file says', async () => {
    // The package has neither `main` nor `exports`: find its bin through its package.json.
    const entry = join(dirname(createRequire(import.meta.url).resolve('@modelcontextprotocol/server-everything/package.json')), 'dist/index.js');
    const dir = mkdtempSync(join(tmpdir(), 'forge-mcp-trust-'));
    const path = join(dir, 'servers.yaml');
    writeFileSync(path, ['version: 1', 'servers:', '  everything:', `    command: ${JSON.stringify(process.execPath)}`, `    args: [${JSON.stringify(entry)}, stdio]`, '    env: { PATH: { fromEnv: PATH } }', '    tools: { echo: { retryable: true } }', ''].join('\n'));
    const [server] = loadServersFile(path, { PATH: '/usr/bin:/bin' }).servers;
    const launch = server!.transport as StdioTransport;
    const client = new Client({ name: 'forge-fleet-test', version: '0' });
    try {
      await client.connect(new StdioClientTransport({ command: launch.command, args: [...launch.args], env: revealAll(launch.env), stderr: 'ignore' }), { timeout: 20_000 });
      const { tools } = await client.listTools({}, { timeout: 20_000 });
      expect(tools.length).toBeGreaterThan(1);
      const echo = tools.find((t) => t.name === 'echo');
      // The server calls echo read-only and idempotent; only the file's word makes it retryable, and nothing makes it speculatable.
      expect(echo?.annotations).toMatchObject({ readOnlyHint: true, idempotentHint: true });
      expect(trustedSettings(echo?.annotations, server!.tools['echo'])).toMatchObject({ retryable: true, speculatable: false, requiresConfirmation: false });
      for (const tool of tools.filter((t) => t.name !== 'echo')) {
        expect(trustedSettings(tool.annotations, server!.tools[tool.name])).toMatchObject({ retryable: false, speculatable: false, requiresConfirmation: tool.annotations?.destructiveHint === true });
      }
    } finally {
      await client.close();
    }
  });
});
