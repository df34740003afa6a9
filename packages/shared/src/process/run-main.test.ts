import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { SAME_REQUEST_MS } from './run-main.js';

const RUN_MAIN = fileURLToPath(new URL('./run-main.ts', import.meta.url));

/** A process whose start prints "ready" and then goes on starting for `moreMs`; its stop prints "stopped". */
function child(moreMs: number, stopMs = 0): { ready: Promise<void>; exit: Promise<number | null>; output: () => string; kill: (s: NodeJS.Signals) => void } {
  const script = join(mkdtempSync(join(tmpdir(), 'run-main-')), 'main.ts');
  writeFileSync(
    script,
    `import { runMain } from ${JSON.stringify(RUN_MAIN)};
runMain('t', async () => {
  process.stdout.write('ready\\n');
  await new Promise((r) => setTimeout(r, ${moreMs}));
  return { log: { info: () => {}, error: () => {} }, stop: async () => { await new Promise((r) => setTimeout(r, ${stopMs})); process.stdout.write('stopped\\n'); } };
});
setInterval(() => {}, 1000);
`,
  );
  const proc = spawn(process.execPath, ['--import', 'tsx', script], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  const ready = new Promise<void>((resolve) => proc.stdout.on('data', (d: Buffer) => ((out += d.toString()), out.includes('ready') && resolve())));
  const exit = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
  return { ready, exit, output: () => out, kill: (s) => proc.kill(s) };
}

describe('runMain', () => {
  it('stops gracefully on a SIGTERM sent as soon as start says it is ready, before start-up has ended', async () => {
    const c = child(300);
    await c.ready;
    c.kill('SIGTERM');
    expect(await c.exit).toBe(0);
    expect(c.output()).toContain('stopped');
  });

  it('takes a signal that follows the first at once as the same request: a terminal\'s Ctrl-C reaches it, then its supervisor\'s SIGTERM', async () => {
    const c = child(0, 300);
    await c.ready;
    c.kill('SIGINT');
    c.kill('SIGTERM');
    expect(await c.exit).toBe(0);
    expect(c.output()).toContain('stopped');
    // The same while it still starts.
    const s = child(300);
    await s.ready;
    s.kill('SIGINT');
    s.kill('SIGTERM');
    expect(await s.exit).toBe(0);
    expect(s.output()).toContain('stopped');
  });

  it('exits at once on a second signal while start-up still runs', async () => {
    const c = child(60_000);
    await c.ready;
    c.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, SAME_REQUEST_MS + 100));
    c.kill('SIGTERM');
    expect(await c.exit).toBe(1);
    expect(c.output()).not.toContain('stopped');
  });

  it('exits at once on a second signal while a stop hangs', async () => {
    const c = child(0, 600_000);
    await c.ready;
    await new Promise((r) => setTimeout(r, 200));
    c.kill('SIGINT');
    await new Promise((r) => setTimeout(r, SAME_REQUEST_MS + 100));
    c.kill('SIGTERM');
    expect(await c.exit).toBe(1);
    expect(c.output()).not.toContain('stopped');
  });
});
