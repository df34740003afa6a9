import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../fixtures/fleet.js';

interface SoakResult {
  calls: number;
  answered: number;
  lost: number;
  duplicates: number;
  wrongResults: number;
  failed: number;
  executedByWorker: number;
  completedByWorker: number;
  redisUsedMb: { peak: number; afterRetention: number };
}

/**
 * The 100,000-call soak (bench/src/soak.ts) as part of the suite: a real
 * dispatcher and a sandboxed worker on a Redis of their own, 256 calls in
 * flight. Checked: nothing lost, answered twice, answered wrongly or failed;
 * the worker executed each call once (its own count); and Redis gives back
 * what the run used once the records' retention has passed. Figures of a
 * committed run: docs/reliability.md.
 */
describe('soak', () => {
  it('answers 100,000 calls exactly once each, and Redis memory falls back once their retention passes', async () => {
    const out = join(ROOT, '.test-results', 'soak.json');
    const child = spawn(process.execPath, ['--conditions=forge-source', '--import', 'tsx', 'bench/src/soak.ts'], {
      cwd: ROOT,
      env: { ...process.env, SOAK_CALLS: '100000', SOAK_RETENTION_MS: '10000', SOAK_FROM_SOURCE: '1', SOAK_OUT: out },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    expect(code, output.slice(-3000)).toBe(0);
    const result = JSON.parse(readFileSync(out, 'utf8')) as SoakResult;
    expect(result).toMatchObject({ calls: 100_000, answered: 100_000, lost: 0, duplicates: 0, wrongResults: 0, failed: 0, executedByWorker: 100_000, completedByWorker: 100_000 });
    // Bounded by the retention: once the records of the run have expired, most of what it used is free again.
    expect(result.redisUsedMb.afterRetention).toBeLessThan(result.redisUsedMb.peak / 2);
  }, 600_000);
});
