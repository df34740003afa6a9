import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort } from '@forge-fleet/local-redis';
import { afterAll, describe, expect, it } from 'vitest';
import { PYTHON, PYTHON_SCRIPT } from '../fixtures/mcp/python-server.js';
import { McpTestDir } from '../fixtures/mcp/servers-files.js';
import { npmStart } from '../fixtures/npm-start.js';

/** What the worker logs when a crash-looped server's fresh pool tries it again (a minute after the crash loop). */
const RETRY_AFTER_CRASH_LOOP = 'trying again after its crash loop';

/**
 * `npm start -- --mcp FILE` whose servers do not all come up: the banner comes
 * once the worker serves and every server is up or known down, naming the
 * ones that are not up and their worker's log, and a server still starting
 * after a few seconds is named while the start waits for it.
 */
describe('npm start with MCP servers that do not all start', () => {
  const mcp = new McpTestDir('start-mcp');
  const stateDir = join(mcp.dir, 'state');
  afterAll(() => {
    mcp.remove();
    rmSync(stateDir, { recursive: true, force: true });
  });

  it('refuses, before starting anything, a servers file that declares no server, with or without the examples', async () => {
    const empty = join(mcp.dir, 'empty.yaml');
    writeFileSync(empty, 'version: 1\nservers: {}\n');
    for (const args of [['--no-examples', '--mcp', empty], ['--mcp', empty]]) {
      const start = npmStart(args, { PORT: String(await freePort()), FORGE_STATE_DIR: stateDir });
      expect((await start.exited).code).toBe(1);
      expect(start.stderr()).toBe(`forge start: cannot run the MCP servers of ${empty}: it declares no server; add one under \`servers:\` (see docs/mcp-servers.md), or leave out --mcp ${empty}\n`);
      expect(start.stdout()).not.toContain('redis-server');
    }
  });

  it('prints the banner once every server is up or down, naming the broken one and its log, and says which server it waits for', async () => {
    const servers = mcp.write({
      good: mcp.python(undefined),
      // Exits at once, every time: its pool crash-loops, and a fresh one tries it again a minute later.
      broken: { command: process.execPath, args: ['-e', "process.stderr.write('boom\\n'); process.exit(1)", '--', mcp.marker] },
      // Comes up, but only after the few seconds past which `npm start` says what it waits for.
      slow: { command: '/bin/sh', args: ['-c', 'sleep 8; exec "$@"', 'sh', PYTHON, join(mcp.pythonDir, PYTHON_SCRIPT)], env: { PATH: { fromEnv: 'PATH' } } },
    });
    const port = await freePort();
    const fleet = npmStart(['--no-examples', '--mcp', servers], { PORT: String(port), FORGE_STATE_DIR: stateDir });
    try {
      await fleet.ready;
      const out = fleet.stdout();
      const log = join(stateDir, 'logs', 'worker-mcp-servers-host.log');
      // The banner came before the broken server's crash loop was tried again: it did not wait the minute out.
      expect(readFileSync(log, 'utf8')).not.toContain(RETRY_AFTER_CRASH_LOOP);

      const lines = out.split('\n');
      const banner = lines.findIndex((l) => l.startsWith('Forge Fleet ') && l.includes(' is running at '));
      expect(banner, out).toBeGreaterThan(-1);
      const waiting = lines.findIndex((l) => /^Forge Fleet: waiting for MCP server 'slow' /.test(l));
      expect(waiting, out).toBeGreaterThan(-1);
      expect(waiting).toBeLessThan(banner);
      expect(lines[waiting]).toContain(log);

      const fileLine = lines.slice(banner).find((l) => l.includes('MCP servers:')) ?? '';
      expect(fileLine).toContain('good (good.*)');
      expect(fileLine).toContain('slow (slow.*)');
      expect(fileLine).toMatch(/broken — (down|stopped) \(.*exited with status 1.*boom.*\); log: /);
      expect(fileLine).toContain(log);
    } finally {
      await fleet.stop();
    }
  });
});
