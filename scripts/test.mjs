#!/usr/bin/env node
// The one test command (`npm test`): typecheck, lint, then every vitest
// project (unit, integration against a real Redis, end-to-end). It always ends
// with the plain line `N passed, N failed` so a run that executed no test shows.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const env = { ...process.env, TURBO_TELEMETRY_DISABLED: '1', DO_NOT_TRACK: '1', FORCE_COLOR: process.env.CI ? '0' : (process.env.FORCE_COLOR ?? '1') };
const run = (label, cmd, args) => {
  console.log(`\n▶ ${label}: ${cmd} ${args.join(' ')}`);
  const r = spawnSync(cmd, args, { cwd: root, stdio: 'inherit', env });
  return r.status === 0;
};

const checks = [];
checks.push(['typecheck', run('typecheck', 'npx', ['turbo', 'run', 'typecheck', '--output-logs=errors-only'])]);
checks.push(['lint', run('lint', 'npx', ['eslint', '.'])]);

const resultsDir = join(root, '.test-results');
const resultsFile = join(resultsDir, 'vitest.json');
mkdirSync(resultsDir, { recursive: true });
rmSync(resultsFile, { force: true });
const extra = process.argv.slice(2);
const vitestOk = run('tests', 'npx', ['vitest', 'run', '--reporter=default', '--reporter=json', `--outputFile.json=${resultsFile}`, ...extra]);

let passed = 0;
let failed = 0;
if (existsSync(resultsFile)) {
  const report = JSON.parse(readFileSync(resultsFile, 'utf8'));
  passed = report.numPassedTests ?? 0;
  failed = (report.numFailedTests ?? 0) + (report.numRuntimeErrorTestSuites ?? 0);
  // A suite that failed to load (syntax error, broken import) counts as failed too.
  failed += (report.testResults ?? []).filter((s) => s.status === 'failed' && (s.assertionResults ?? []).length === 0).length;
}
const failedChecks = checks.filter(([, ok]) => !ok).map(([name]) => name);
if (failedChecks.length > 0) console.log(`\n✖ failed checks: ${failedChecks.join(', ')}`);
const ok = vitestOk && failedChecks.length === 0 && failed === 0 && passed > 0;
if (passed === 0) console.log('\n✖ no test was executed');
console.log(`${passed} passed, ${failed} failed`);
process.exit(ok ? 0 : 1);
