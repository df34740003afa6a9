#!/usr/bin/env node
// `npm start`. The distributed fleet (dispatcher, tier queues, worker pools)
// is issue #3 and does not exist yet; until it does, this runs what exists:
// the full call pipeline in one process, on example tools of every tier.
import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
console.log('Note: the dispatcher and worker apps are not built yet (issue #3); running the in-process pipeline demo.\n');
const r = spawnSync('npx', ['tsx', '--conditions=forge-source', 'examples/in-process.ts'], { cwd: root, stdio: 'inherit' });
process.exit(r.status ?? 1);
