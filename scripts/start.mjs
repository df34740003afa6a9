#!/usr/bin/env node
// `npm start`: a local Forge Fleet for a newcomer, in one command.
//   Redis      REDIS_URL, or a redis-server from PATH on a free port with a temp dir
//   dispatcher http://127.0.0.1:$PORT (default 8080)
//   workers    one per tier (platform, embedded, host) serving examples/tools.ts
// A development API key granting every tool is generated at start-up and written,
// with the URL, to $FORGE_STATE_DIR/dev.json (default .forge/) for `npm run demo`.
// Ctrl-C stops everything it started.
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const stateDir = resolve(process.env.FORGE_STATE_DIR ?? join(root, '.forge'));
const logDir = join(stateDir, 'logs');
const port = Number(process.env.PORT ?? 8080);
const host = process.env.HOST ?? '127.0.0.1';
const say = (line = '') => process.stdout.write(`${line}\n`);
const fail = (message) => {
  process.stderr.write(`forge start: ${message}\n`);
  process.exitCode = 1;
};

say('Forge Fleet: building…');
const build = spawnSync('npx', ['turbo', 'run', 'build', '--output-logs=errors-only'], { cwd: root, stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, TURBO_TELEMETRY_DISABLED: '1' } });
if (build.status !== 0) {
  fail('the build failed (see above); run `npm ci` first');
  process.exit(1);
}

const { startLocalRedis, LocalRedisUnavailableError } = await import('@forge-fleet/local-redis');
const { deriveQueueKey, generateTokenKeys, mintToken, queueName } = await import('@forge-fleet/shared');
const children = [];
let redis;
let stopping = false;

async function stopAll(code) {
  if (stopping) return;
  stopping = true;
  say('\nForge Fleet: stopping…');
  const workers = children.filter((c) => c.name !== 'dispatcher');
  await Promise.all(workers.map((c) => c.stop()));
  await Promise.all(children.filter((c) => c.name === 'dispatcher').map((c) => c.stop()));
  await redis?.stop();
  say('Forge Fleet: stopped.');
  process.exit(code);
}
process.once('SIGINT', () => void stopAll(0));
process.once('SIGTERM', () => void stopAll(0));

function run(name, bin, args, env) {
  mkdirSync(logDir, { recursive: true });
  const log = createWriteStream(join(logDir, `${name}.log`), { flags: 'w' });
  // Node flags on the bin's shebang line (the worker tunes its heap there) apply here too.
  const shebang = readFileSync(join(root, bin), 'utf8').split('\n', 1)[0];
  const flags = /^#!.*\bnode\b(.*)$/.exec(shebang)?.[1]?.trim().split(/\s+/).filter(Boolean) ?? [];
  const proc = spawn(process.execPath, [...flags, join(root, bin), ...args], { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  proc.stdout.pipe(log);
  proc.stderr.pipe(log);
  let tail = '';
  proc.stderr.on('data', (d) => (tail = (tail + d.toString()).slice(-2000)));
  const exited = new Promise((r) => proc.once('exit', (code) => r(code)));
  exited.then((code) => {
    if (stopping) return;
    fail(`${name} exited (${code}) unexpectedly:\n${tail}\n(full log: ${join(logDir, `${name}.log`)})`);
    void stopAll(1);
  });
  const child = {
    name,
    proc,
    stop: async () => {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
      await exited;
    },
  };
  children.push(child);
  return child;
}

// Generous: on a loaded two-core machine the sandboxes' bundling and first processes take a while.
async function until(what, check, timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (stopping) process.exit(process.exitCode ?? 1);
    try {
      if (await check()) return;
    } catch {
      // not yet
    }
    if (Date.now() > deadline) {
      fail(`${what} did not happen within ${timeoutMs} ms; see ${logDir}`);
      await stopAll(1);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

let redisUrl = process.env.REDIS_URL;
if (redisUrl === undefined || redisUrl === '') {
  try {
    redis = await startLocalRedis();
  } catch (error) {
    fail(error instanceof LocalRedisUnavailableError ? error.message : String(error));
    process.exit(1);
  }
  redisUrl = redis.url;
  say(`Forge Fleet: started redis-server at ${redisUrl} (set REDIS_URL to use your own)`);
}

// Dev keys, generated now and never stored in the repo: the token key pair (the dispatcher holds the public half)
// and the call-signing secret (the dispatcher signs every call with its queue's derived key; each worker holds only
// its own queue's key).
const tokenKeys = generateTokenKeys();
const dayInSeconds = 24 * 3600;
const token = await mintToken(tokenKeys.privateKeyPem, { subject: 'dev', grants: ['*'], expiresInSeconds: dayInSeconds });
const limitedToken = await mintToken(tokenKeys.privateKeyPem, { subject: 'dev-limited', expiresInSeconds: dayInSeconds });
// For the web console (/ui): queues, approvals and the audit stream need an admin (or approver) token.
const adminToken = await mintToken(tokenKeys.privateKeyPem, { subject: 'dev-admin', role: 'admin', expiresInSeconds: dayInSeconds });
const fleetEnv = { REDIS_URL: redisUrl, LOG_LEVEL: process.env.LOG_LEVEL ?? 'info' };
const signingSecret = randomBytes(32);
const prefix = process.env.FORGE_PREFIX ?? 'forge';
run('dispatcher', 'apps/dispatcher/bin/forge-dispatcher.js', [], {
  ...fleetEnv,
  FORGE_SIGNING_SECRET: signingSecret.toString('base64url'),
  PORT: String(port),
  HOST: host,
  FORGE_TOKEN_PUBLIC_KEY: tokenKeys.publicKeyPem,
});
const url = `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
await until('the dispatcher answering /readyz', async () => (await fetch(`${url}/readyz`)).ok);
for (const tier of ['platform', 'embedded', 'host']) {
  const callKey = deriveQueueKey(signingSecret, queueName(prefix, tier)).toString('base64url');
  run(`worker-${tier}`, 'apps/worker/bin/forge-worker.js', ['--tier', tier, '--tools', 'examples/tools.ts'], { ...fleetEnv, FORGE_CALL_KEY: callKey });
}
const expected = ['clock', 'echo', 'http_get', 'wasm_add', 'word_count'];
await until('every example tool being served', async () => {
  const { tools } = await (await fetch(`${url}/v1/tools`, { headers: { authorization: `Bearer ${token}` } })).json();
  return expected.every((name) => tools.some((t) => t.name === name));
});

mkdirSync(stateDir, { recursive: true });
writeFileSync(join(stateDir, 'dev.json'), `${JSON.stringify({ url, token, limitedToken, adminToken }, null, 2)}\n`, { mode: 0o600 });
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
say(`
Forge Fleet ${pkg.version} is running at ${url}
  workers: platform, embedded, host (tools: ${expected.join(', ')})
  dev token (agent 'dev', grants every Host-tier tool, valid 24 h; keys generated now, not stored in the repo):
    export FORGE_TOKEN=${token}
  web console: ${url}/ui — sign in with this admin token (user 'dev-admin', valid 24 h):
    ${adminToken}
  logs: ${logDir}

Try it:
  curl -s ${url}/v1/tools -H "authorization: Bearer $FORGE_TOKEN"
  curl -s -X POST '${url}/v1/calls?wait=5000' -H "authorization: Bearer $FORGE_TOKEN" -H 'content-type: application/json' -d '{"name":"wasm_add","arguments":{"a":2,"b":40}}'
  curl -s -X POST '${url}/v1/calls?wait=5000' -H "authorization: Bearer $FORGE_TOKEN" -H 'content-type: application/json' -d '{"name":"http_get","arguments":{"url":"${url}/healthz"}}'
  npm run demo        # an example agent calling tools of every tier

Ctrl-C stops the fleet.`);
