import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** Runs the README's start command as a person would and collects what it prints. */
function runStart(): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('npm', ['start', '--silent'], { cwd: root, env: { ...process.env, FORCE_COLOR: '0' } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('npm start (until the fleet exists: the in-process pipeline demo)', () => {
  it('runs calls of every tier through scope, schema, approval and execution', async () => {
    const { code, stdout, stderr } = await runStart();
    expect(stderr).toBe('');
    expect(code).toBe(0);
    expect(stdout).toMatch(/platform: clock\s+→ completed: \d{4}-\d{2}-\d{2}T/);
    expect(stdout).toMatch(/embedded: echo\s+→ completed: \{"echoed":"hi"\}/);
    expect(stdout).toMatch(/bad arguments\s+→ SCHEMA_VALIDATION: .*'\/text'/);
    expect(stdout).toMatch(/out of scope: http_get\s+→ OUT_OF_SCOPE/);
    expect(stdout).toMatch(/host, no authorization\s+→ APPROVAL_DENIED/);
    expect(stdout).toMatch(/host, authorized\s+→ completed: would GET https:\/\/example.com/);
    expect(stdout).toMatch(/model text: malformed block\s+→ MALFORMED_TOOL_BLOCK: .*line 5/);
    expect(stdout).toContain('audit entries: 1 (http_get out_of_scope); risk signals: 1');
  });
});
