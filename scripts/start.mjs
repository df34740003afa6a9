#!/usr/bin/env node
// `npm start`: a local Forge Fleet for a newcomer, in one command.
//   Redis      REDIS_URL, or a redis-server from PATH on a free port with a temp dir
//   dispatcher http://127.0.0.1:$PORT (default 8080)
//   workers    one per tier and host pool that has tools: those of examples/tools.ts (unless --no-examples),
//              and those of every module given with --tools (repeatable) or FORGE_TOOLS; and one per tier and
//              host pool of each MCP servers file given with --mcp (repeatable), running its servers there
//   keys       $FORGE_STATE_DIR/keys (default .forge/keys, git-ignored): made on the first start, as
//              `forge keys init` makes them, and reused after, so `forge token mint --key .forge/keys/token.key`
//              mints tokens this fleet accepts and `forge keys worker-key` gives more workers their key
// Development tokens minted from those keys are written, with the URL (and Redis's), to $FORGE_STATE_DIR/dev.json
// for `npm run demo` and the `forge` CLI. Ctrl-C stops everything it started; so does a start that fails, which
// says why in one line.
import { spawn, spawnSync } from 'node:child_process';
import { createWriteStream, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { basename, delimiter, dirname, extname, isAbsolute, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const EXAMPLES = join(root, 'examples', 'tools.ts');
const USAGE = `usage: npm start -- [--tools MODULE]... [--mcp SERVERS_FILE]... [--no-examples]
  --tools MODULE  serve this tools module too (repeatable; FORGE_TOOLS adds more, separated by "," or "${delimiter}")
  --mcp FILE      run the MCP servers of this file (docs/mcp-servers.md) on workers of their tiers, and serve their tools
  --no-examples   serve only your modules and servers, not examples/tools.ts
environment: PORT (8080), HOST (127.0.0.1), REDIS_URL (default: a redis-server of its own), FORGE_STATE_DIR (.forge),
             FORGE_PREFIX, LOG_LEVEL and the other FORGE_* settings of README.md`;

const say = (line = '') => process.stdout.write(`${line}\n`);
/** The one line a failed start ends with: control characters (newlines included) become spaces. */
// eslint-disable-next-line no-control-regex
const oneLine = (text) => text.replace(/[\u0000-\u001f\u007f-\u009f]+/g, ' ').trim();
const fail = (message) => {
  process.stderr.write(`forge start: ${oneLine(message)}\n`);
  process.exitCode = 1;
};
/** A wrong command line: the problem, the usage, exit 2. */
const usageError = (message) => {
  process.stderr.write(`forge start: ${oneLine(message)}\n\n${USAGE}\n`);
  process.exit(2);
};

let options;
try {
  ({ values: options } = parseArgs({
    options: { tools: { type: 'string', multiple: true }, mcp: { type: 'string', multiple: true }, 'no-examples': { type: 'boolean' }, help: { type: 'boolean', short: 'h' } },
    strict: true,
    allowPositionals: false,
  }));
} catch (error) {
  usageError(error instanceof Error ? error.message : String(error));
}
if (options.help === true) {
  say(USAGE);
  process.exit(0);
}

const stateDir = resolve(process.env.FORGE_STATE_DIR || join(root, '.forge'));
const logDir = join(stateDir, 'logs');
const keysDir = join(stateDir, 'keys');
const portText = process.env.PORT || '8080';
const port = Number(portText);
if (!/^\d+$/.test(portText) || port < 1 || port > 65_535) usageError(`PORT=${portText} is not a port number (1-65535)`);
const host = process.env.HOST || '127.0.0.1';
const prefix = process.env.FORGE_PREFIX || 'forge';

/** A path as the printed commands (run from the repository) should spell it. */
const display = (path) => {
  const rel = relative(root, path);
  return rel === '' || rel.startsWith('..') || isAbsolute(rel) ? path : rel;
};
/** A word a POSIX shell reads back as it is. */
const sh = (word) => (/^[\w./:=@%+,-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`);

// The modules to serve. npm runs scripts in the package's directory; relative paths are the caller's (INIT_CWD).
const callerDir = process.env.INIT_CWD || process.cwd();
const fromEnv = (process.env.FORGE_TOOLS ?? '').split(new RegExp(`[,${delimiter === ';' ? ';' : ':'}]`));
const requested = [...(options.tools ?? []), ...fromEnv].map((p) => p.trim()).filter(Boolean);
const modules = [];
for (const path of [...(options['no-examples'] === true ? [] : [EXAMPLES]), ...requested.map((p) => resolve(callerDir, p))]) {
  if (modules.some((m) => m.path === path)) continue;
  if (!existsSync(path)) usageError(`cannot serve ${path}: no such file (--tools and FORGE_TOOLS paths are relative to ${callerDir})`);
  modules.push({ path, label: display(path), examples: path === EXAMPLES });
}
const serversFiles = [];
for (const path of (options.mcp ?? []).map((p) => resolve(callerDir, p))) {
  if (serversFiles.some((f) => f.path === path)) continue;
  if (!existsSync(path)) usageError(`cannot run the MCP servers of ${path}: no such file (--mcp paths are relative to ${callerDir})`);
  serversFiles.push({ path, label: display(path) });
}
if (modules.length === 0 && serversFiles.length === 0) usageError('--no-examples leaves nothing to serve; add --tools ./my-tools.mjs or --mcp ./servers.yaml');

say('Forge Fleet: building…');
const build = spawnSync('npx', ['turbo', 'run', 'build', '--output-logs=errors-only'], { cwd: root, stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, TURBO_TELEMETRY_DISABLED: '1' } });
if (build.status !== 0) {
  fail('the build failed (see above); run `npm ci` first');
  process.exit(1);
}

// What each module serves, read the way a worker reads it (loadToolsModule, selectTools) but in a process of its
// own: a module's import side effects stay out of this one, and every problem shows before anything starts.
const PROBE = `
const { loadToolsModule, selectTools } = await import('@forge-fleet/worker');
const why = (e) => (e && e.code ? e.code + ': ' : '') + (e instanceof Error ? e.message : String(e));
const out = [];
for (const path of JSON.parse(process.argv[1])) {
  try {
    const tools = await loadToolsModule(path);
    const groups = [];
    for (const { definition: d } of tools) {
      const pool = d.tier === 'host' ? d.pool : undefined;
      if (!groups.some((g) => g.tier === d.tier && g.pool === pool)) groups.push({ tier: d.tier, pool });
    }
    for (const g of groups) selectTools(tools, g.tier, g.pool);
    out.push({ path, tools: tools.map((t) => t.definition.name), groups });
  } catch (error) {
    out.push({ path, error: why(error) });
  }
}
const files = [];
const { loadServersFile, placeOfTool } = await import('@forge-fleet/worker');
for (const path of JSON.parse(process.argv[2])) {
  try {
    const { servers } = loadServersFile(path, process.env);
    const groups = [];
    const add = (tier, pool) => {
      if (!groups.some((g) => g.tier === tier && g.pool === pool)) groups.push({ tier, pool });
    };
    for (const s of servers) {
      add(s.tier, s.tier === 'host' ? s.pool : undefined);
      for (const tool of Object.keys(s.tools)) {
        const place = placeOfTool(s, tool);
        add(place.tier, place.tier === 'host' ? place.pool : undefined);
      }
    }
    files.push({ path, servers: servers.map((s) => ({ name: s.name, prefix: s.prefix })), groups });
  } catch (error) {
    files.push({ path, error: why(error) });
  }
}
process.stdout.write('\\n@@forge-probe@@' + JSON.stringify({ out, files }));
process.exit(0);
`;
const probe = spawnSync(process.execPath, ['--input-type=module', '-e', PROBE, JSON.stringify(modules.map((m) => m.path)), JSON.stringify(serversFiles.map((f) => f.path))], { cwd: root, encoding: 'utf8', timeout: 120_000, env: { ...process.env, LOG_LEVEL: 'silent' } });
const probed = probe.stdout?.split('\n@@forge-probe@@').at(-1);
let served;
let probedFiles;
try {
  ({ out: served, files: probedFiles } = JSON.parse(probed ?? ''));
} catch {
  fail(`could not read the tools modules: ${oneLine(probe.stderr || String(probe.error ?? 'no answer')).slice(0, 500)}`);
  process.exit(1);
}
for (const [i, m] of modules.entries()) {
  const { error, tools, groups } = served[i];
  if (error !== undefined) {
    fail(`cannot serve ${m.label}: ${error}`);
    process.exit(1);
  }
  const order = ['platform', 'embedded', 'host'];
  groups.sort((a, b) => order.indexOf(a.tier) - order.indexOf(b.tier) || (a.pool ?? '').localeCompare(b.pool ?? ''));
  Object.assign(m, { tools, groups });
}
for (const [i, f] of serversFiles.entries()) {
  const { error, servers, groups } = probedFiles[i];
  if (error !== undefined) {
    fail(`cannot run the MCP servers of ${f.label}: ${error}`);
    process.exit(1);
  }
  // A worker refuses a file that places nothing in its lane; a file with no server at all would get no worker here.
  if (servers.length === 0) {
    fail(`cannot run the MCP servers of ${f.label}: it declares no server; add one under \`servers:\` (see docs/mcp-servers.md), or leave out --mcp ${f.label}`);
    process.exit(1);
  }
  Object.assign(f, { servers, groups });
}
// One live tool name, one definition: a second module's tool of the same name would be refused by the catalog.
for (const [i, m] of modules.entries()) {
  for (const other of modules.slice(0, i)) {
    const both = m.tools.filter((t) => other.tools.includes(t));
    if (both.length > 0) {
      const it = both.length === 1 ? 'it' : 'them';
      const fix = other.examples ? `rename ${it} in yours, or serve only yours with --no-examples` : `rename ${it} in one of them`;
      fail(`${both.map((t) => `'${t}'`).join(', ')} ${both.length === 1 ? 'is' : 'are'} in both ${other.label} and ${m.label}; ${fix}`);
      process.exit(1);
    }
  }
}

// The redis-server runs under a keeper of its own process group: a terminal's Ctrl-C (or `kill -- -PGID`) reaches
// every process of this group at once, and a redis-server among them would go first, leaving the workers their grace
// period to log ECONNREFUSED instead of finishing their calls. This script stops it once the apps have exited. The
// keeper holds the read end of a pipe from this process: when this process ends in any way (SIGKILL included), the
// pipe closes and the keeper stops redis-server and exits, so nothing is left behind.
const REDIS_KEEPER = `
const { startLocalRedis } = await import('@forge-fleet/local-redis');
const starting = startLocalRedis();
let redis;
let stopping;
const stop = () => (stopping ??= (async () => {
  await starting.catch(() => undefined);
  await redis?.stop();
  process.exit(0);
})());
process.on('SIGINT', () => undefined);
process.on('SIGTERM', () => void stop());
process.stdin.on('end', () => void stop());
process.stdin.on('error', () => void stop());
process.stdin.resume();
try {
  redis = await starting;
} catch (error) {
  process.stdout.write(JSON.stringify({ error: error instanceof Error ? error.message : String(error) }) + '\\n');
  process.exit(1);
}
process.stdout.write(JSON.stringify({ url: redis.url }) + '\\n');
`;

/** A redis-server of this fleet's own, under the keeper above: its URL, and `stop`, which resolves once it is gone. */
function startRedis() {
  const keeper = spawn(process.execPath, ['--input-type=module', '-e', REDIS_KEEPER], { cwd: root, detached: true, stdio: ['pipe', 'pipe', 'inherit'] });
  const exited = new Promise((r) => keeper.once('exit', r));
  keeper.stdin.on('error', () => undefined);
  const stop = async () => {
    keeper.stdin.end();
    await exited;
  };
  return new Promise((resolve, reject) => {
    let out = '';
    keeper.stdout.on('data', (d) => {
      out += d.toString();
      const line = out.split('\n', 2);
      if (line.length < 2) return;
      let message;
      try {
        message = JSON.parse(line[0]);
      } catch {
        message = { error: `the redis-server keeper said: ${line[0]}` };
      }
      if (typeof message.url === 'string') resolve({ url: message.url, stop });
      else reject(new Error(message.error));
    });
    void exited.then((code) => reject(new Error(`could not start redis-server (its keeper exited ${code}): ${oneLine(out)}`)));
  });
}
const { mintToken } = await import('@forge-fleet/shared');
const { initKeys, KEY_FILES, workerKey } = await import('@forge-fleet/cli');
const children = [];
let redis;
/** Set once stopping began: resolves never (stopAll exits the process). */
let stopping;

function stopAll(code) {
  stopping ??= (async () => {
    const started = children.length > 0 || redis !== undefined;
    if (started) say('\nForge Fleet: stopping…');
    const workers = children.filter((c) => c.name !== 'dispatcher');
    await Promise.all(workers.map((c) => c.stop()));
    await Promise.all(children.filter((c) => c.name === 'dispatcher').map((c) => c.stop()));
    await redis?.stop();
    if (started) say('Forge Fleet: stopped.');
    process.exit(code);
  })();
  return stopping;
}
// A second Ctrl-C (or TERM) while stopping hurries the processes rather than leaving them: each is signalled again,
// which a fleet process takes as "exit now" (run-main.ts), and this one still waits for them and stops Redis after.
// Were the default action left to a second signal, it would end this process alone, its children orphaned.
const onStopSignal = () => {
  if (stopping === undefined) return void stopAll(0);
  say('Forge Fleet: stopping now…');
  for (const child of children) if (child.proc.exitCode === null && child.proc.signalCode === null) child.proc.kill('SIGTERM');
};
process.on('SIGINT', onStopSignal);
process.on('SIGTERM', onStopSignal);

/** Whether something listens on host:port (asked by trying to listen there ourselves). */
function portInUse(h, p) {
  return new Promise((done) => {
    const probeServer = createServer();
    probeServer.once('error', (error) => done(error.code === 'EADDRINUSE'));
    probeServer.listen({ port: p, host: h, exclusive: true }, () => probeServer.close(() => done(false)));
  });
}

/** Why a fleet process stopped: its own one-line report (`forge-worker: CODE: …`), else its last line on stderr. */
function reasonOf(stderr) {
  const lines = stderr.split('\n').map((l) => l.trim()).filter(Boolean);
  return lines.findLast((l) => /^forge-[a-z]+: /.test(l)) ?? lines.at(-1) ?? 'no message';
}

/**
 * Starts a fleet process, its output going to its log. `onLine`, when given, also reads each line it writes on
 * stdout (a worker's JSON log lines), so this script can follow what it does without reading the file back.
 */
function run(name, bin, args, env, onLine) {
  mkdirSync(logDir, { recursive: true });
  const logFile = join(logDir, `${name}.log`);
  const log = createWriteStream(logFile, { flags: 'w' });
  // Node flags on the bin's shebang line (the worker tunes its heap there) apply here too.
  const shebang = readFileSync(join(root, bin), 'utf8').split('\n', 1)[0];
  const flags = /^#!.*\bnode\b(.*)$/.exec(shebang)?.[1]?.trim().split(/\s+/).filter(Boolean) ?? [];
  const proc = spawn(process.execPath, [...flags, join(root, bin), ...args], { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  proc.stdout.pipe(log);
  proc.stderr.pipe(log);
  if (onLine !== undefined) {
    let partial = '';
    proc.stdout.on('data', (d) => {
      const lines = (partial + d.toString()).split('\n');
      // A line cut short by a chunk's end waits for the rest; an endless one is not kept whole.
      partial = (lines.pop() ?? '').slice(-65_536);
      for (const line of lines) onLine(line);
    });
  }
  let tail = '';
  proc.stderr.on('data', (d) => (tail = (tail + d.toString()).slice(-4000)));
  const exited = new Promise((r) => proc.once('exit', (code, signal) => r(code ?? signal)));
  const child = {
    name,
    logFile,
    proc,
    ready: false,
    stop: async () => {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
      await exited;
    },
  };
  exited.then(async (code) => {
    if (stopping !== undefined) return;
    // A dispatcher that never came up on a port something else holds: say so, not how Node put it.
    if (name === 'dispatcher' && !child.ready && (await portInUse(host, port))) fail(`port ${port} is in use; set PORT=… to another port`);
    else fail(`${name} stopped (exit ${code}): ${reasonOf(tail).slice(0, 600)} (log: ${display(logFile)})`);
    void stopAll(1);
  });
  children.push(child);
  return child;
}

// Generous: on a loaded two-core machine the sandboxes' bundling and first processes take a while.
async function until(what, check, timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (stopping !== undefined) await stopping;
    try {
      if (await check()) return;
    } catch {
      // not yet
    }
    if (Date.now() > deadline) {
      fail(`${what} did not happen within ${timeoutMs / 1000} s; see the logs in ${display(logDir)}`);
      await stopAll(1);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * This fleet's keys, the files `forge keys init` writes: made on the first start, reused after (tokens minted
 * from them and worker keys derived from them keep working across restarts).
 */
function fleetKeys() {
  const files = { tokenKey: join(keysDir, KEY_FILES.tokenPrivate), tokenPub: join(keysDir, KEY_FILES.tokenPublic), signingSecret: join(keysDir, KEY_FILES.signingSecret) };
  const present = Object.values(files).filter((f) => existsSync(f));
  if (present.length === 0) {
    initKeys(keysDir);
    return { ...files, made: true };
  }
  if (present.length < 3) {
    const missing = Object.values(files).filter((f) => !present.includes(f)).map((f) => basename(f));
    throw new Error(`${display(keysDir)} lacks ${missing.join(', ')}; restore it, or delete ${display(keysDir)} to make new keys (tokens minted from the old ones stop working)`);
  }
  return { ...files, made: false };
}

/** How long the start waits for a server still starting before it says so. */
const WAITING_NOTICE_MS = 3000;
/** How long the start waits for MCP servers still starting at most; the banner then says which still were. */
const SERVERS_SETTLE_MS = 60_000;

/**
 * What a worker's log lines say of its MCP servers before its `/readyz` answers (the worker serves that port only
 * once it takes calls, at most 3 s after its servers' first start began): its metrics port, and the servers that came up or could not.
 * The messages are the worker's (apps/worker: main.ts, mcp-servers/worker-servers.ts); at a LOG_LEVEL above `info`
 * only failures are seen, and the catalog still tells the servers that came up.
 */
function watchWorkerLine(watch, line) {
  if (!line.startsWith('{')) return;
  let entry;
  try {
    entry = JSON.parse(line);
  } catch {
    return;
  }
  const msg = typeof entry?.msg === 'string' ? entry.msg : '';
  if (msg.startsWith('metrics and probes listening') && Number.isInteger(entry.port)) watch.metricsPort = entry.port;
  else if (typeof entry.server !== 'string') return;
  else if (msg.startsWith('MCP server instance started')) watch.told.set(entry.server, { state: 'started' });
  else if (msg.startsWith('MCP server could not be started')) watch.told.set(entry.server, { state: 'down', error: entry.err });
  else if (msg.startsWith('MCP server crash-looped')) watch.told.set(entry.server, { state: 'stopped', error: entry.err });
}

/** The servers a worker's `/readyz` reports (`{ name, state, error? }`), or undefined while it does not answer. */
async function readyServers(worker) {
  if (worker.watch.metricsPort === undefined) return undefined;
  try {
    const response = await fetch(`http://127.0.0.1:${worker.watch.metricsPort}/readyz`, { signal: AbortSignal.timeout(2000) });
    const body = await response.json();
    return Array.isArray(body?.servers) ? body.servers : undefined;
  } catch {
    return undefined;
  }
}

/**
 * One server's state from its file's workers: `up` once its tools are in the catalog; else what a worker's
 * `/readyz` says (`up` there but not yet in the catalog is still `starting`), else its log lines; else `starting`.
 */
function stateOf(server, listed, reports) {
  if (listed) return { state: 'up' };
  const seen = reports.filter((r) => r !== undefined);
  for (const want of ['starting', 'down', 'stopped']) {
    const found = seen.find((r) => (want === 'starting' ? r.state === 'starting' || r.state === 'up' || r.state === 'started' : r.state === want));
    if (found !== undefined) return want === 'starting' ? { state: 'starting' } : { state: want, error: found.error };
  }
  return { state: 'starting' };
}

/**
 * Waits until every MCP server of `files` is up or known down or stopped (at most SERVERS_SETTLE_MS), naming each
 * one still starting after WAITING_NOTICE_MS once. Resolves with each server, its state, error and log.
 */
async function settleMcpServers(files, listTools) {
  const servers = files.flatMap((f) => f.servers.map((s) => ({ ...s, file: f, state: 'starting', error: undefined, logs: f.workers.map((w) => w.logFile) })));
  if (servers.length === 0) return servers;
  const began = Date.now();
  const noticed = new Set();
  for (;;) {
    const tools = await listTools().catch(() => []);
    for (const f of files) {
      const ready = await Promise.all(f.workers.map((w) => readyServers(w)));
      for (const s of servers.filter((x) => x.file === f)) {
        // The worker that runs it: the one whose /readyz or log names it (a file's servers spread over its lanes' workers).
        const reports = f.workers.map((w, i) => ready[i]?.find((r) => r?.name === s.name) ?? w.watch.told.get(s.name));
        const runs = f.workers.filter((_, i) => reports[i] !== undefined);
        if (runs.length > 0) s.logs = runs.map((w) => w.logFile);
        Object.assign(s, { error: undefined }, stateOf(s, tools.some((t) => t.name.startsWith(`${s.prefix}.`)), reports));
        // Its instance is up (the worker said so), its tools on their way to the catalog: not one to wait for.
        s.launched = reports.some((r) => r?.state === 'started' || r?.state === 'up');
      }
    }
    const starting = servers.filter((s) => s.state === 'starting');
    if (starting.length === 0 || Date.now() - began > SERVERS_SETTLE_MS) return servers;
    if (Date.now() - began >= WAITING_NOTICE_MS) {
      for (const s of starting.filter((x) => !noticed.has(x) && x.launched !== true)) {
        noticed.add(s);
        say(`Forge Fleet: waiting for MCP server '${s.name}' of ${s.file.label} to start (log: ${s.logs.map(display).join(', ')})`);
      }
    }
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** `text` within `max` characters: cut at a word's end, marked with `…` (the whole text is in the worker's log and /readyz). */
function cutShort(text, max) {
  if (text.length <= max) return text;
  const cut = text.slice(0, max - 1);
  const space = cut.lastIndexOf(' ');
  return `${space > max / 2 ? cut.slice(0, space) : cut}…`;
}

/** A server as the banner names it: its tools' prefix when up, else its state, why (one line, cut short) and its log. */
function serverText(s) {
  if (s.state === 'up') return `${s.name} (${s.prefix}.*)`;
  const why = typeof s.error === 'string' && s.error !== '' ? ` (${cutShort(oneLine(s.error), 400)})` : '';
  const state = s.state === 'starting' ? 'still starting' : s.state;
  return `${s.name} — ${state}${why}; log: ${s.logs.map(display).join(', ')}`;
}

/** A log and worker name for each group of a module: `worker-host` for the examples, `worker-my-tools-host-ops` for yours. */
function workerName(m, group) {
  const stem = m.examples ? '' : `${basename(m.path, extname(m.path)).replace(/[^\w.-]+/g, '_')}-`;
  const base = `worker-${stem}${group.tier}${group.pool === undefined ? '' : `-${group.pool}`}`;
  let name = base;
  for (let n = 2; children.some((c) => c.name === name); n++) name = `${base}-${n}`;
  return name;
}

/** REDIS_URL as the printed commands show it: a password in it is not printed. */
function shownRedisUrl(text) {
  try {
    const url = new URL(text);
    if (url.password !== '') url.password = '…';
    return url.password === '' ? text : url.toString();
  } catch {
    return text;
  }
}

try {
  const keys = fleetKeys();
  const privateKeyPem = readFileSync(keys.tokenKey, 'utf8');
  const dayInSeconds = 24 * 3600;
  const token = await mintToken(privateKeyPem, { subject: 'dev', grants: ['*'], expiresInSeconds: dayInSeconds });
  const limitedToken = await mintToken(privateKeyPem, { subject: 'dev-limited', expiresInSeconds: dayInSeconds });
  // For the web console (/ui): queues, approvals and the audit stream need an admin (or approver) token.
  const adminToken = await mintToken(privateKeyPem, { subject: 'dev-admin', role: 'admin', expiresInSeconds: dayInSeconds });

  let redisUrl = process.env.REDIS_URL;
  if (redisUrl === undefined || redisUrl === '') {
    redis = await startRedis();
    redisUrl = redis.url;
    say(`Forge Fleet: started redis-server at ${redisUrl} (set REDIS_URL to use your own)`);
  }

  // The dispatcher verifies tokens with token.pub and signs every call with its queue's key, derived from
  // signing.secret; each worker holds only its own queue's key. The files win over inline values in the caller's
  // environment, so that the tokens `forge token mint --key` makes from these keys are the ones this fleet accepts.
  const fleetEnv = { REDIS_URL: redisUrl, LOG_LEVEL: process.env.LOG_LEVEL ?? 'info' };
  // Checked here, not left to the dispatcher alone: whatever holds the port may answer /readyz (another `npm start`
  // does), which would pass for this fleet's dispatcher until it gave up. Should the port be taken in between, the
  // dispatcher's exit says so.
  if (await portInUse(host, port)) throw new Error(`port ${port} is in use; set PORT=… to another port`);
  const dispatcher = run('dispatcher', 'apps/dispatcher/bin/forge-dispatcher.js', [], {
    ...fleetEnv,
    PORT: String(port),
    HOST: host,
    FORGE_TOKEN_PUBLIC_KEY: '',
    FORGE_TOKEN_PUBLIC_KEY_FILE: keys.tokenPub,
    FORGE_SIGNING_SECRET: '',
    FORGE_SIGNING_SECRET_FILE: keys.signingSecret,
  });
  const url = `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
  await until('the dispatcher answering /readyz', async () => (await fetch(`${url}/readyz`)).ok);
  dispatcher.ready = true;
  for (const m of modules) {
    for (const group of m.groups) {
      const args = ['--tier', group.tier, ...(group.pool === undefined ? [] : ['--pool', group.pool]), '--tools', m.path];
      run(workerName(m, group), 'apps/worker/bin/forge-worker.js', args, { ...fleetEnv, FORGE_CALL_KEY: workerKey(keys.signingSecret, prefix, group.tier, group.pool) });
    }
  }
  for (const f of serversFiles) {
    f.workers = [];
    for (const group of f.groups) {
      const args = ['--tier', group.tier, ...(group.pool === undefined ? [] : ['--pool', group.pool]), '--mcp', f.path];
      const name = `worker-mcp-${basename(f.path, extname(f.path)).replace(/[^\w-]+/g, '-')}-${group.tier}${group.pool === undefined ? '' : `-${group.pool}`}`;
      const watch = { metricsPort: undefined, told: new Map() };
      const child = run(name, 'apps/worker/bin/forge-worker.js', args, { ...fleetEnv, FORGE_CALL_KEY: workerKey(keys.signingSecret, prefix, group.tier, group.pool) }, (line) => watchWorkerLine(watch, line));
      f.workers.push(Object.assign(child, { watch }));
    }
  }
  const expected = modules.flatMap((m) => m.tools);
  const listTools = async () => (await (await fetch(`${url}/v1/tools`, { headers: { authorization: `Bearer ${token}` } })).json()).tools;
  await until('every tool being served', async () => {
    const tools = await listTools();
    return expected.every((name) => tools.some((t) => t.name === name));
  });
  // Each MCP server is waited for until it is up (its tools served) or known not to be: one that cannot start or
  // crash-loops is named in the banner with its worker's log, not waited for until its pool tries it again.
  const mcpServers = await settleMcpServers(serversFiles, listTools);

  mkdirSync(stateDir, { recursive: true });
  // redisUrl: for the README's extra-worker recipe (`REDIS_URL=$(node -p 'require("./.forge/dev.json").redisUrl') …`).
  writeFileSync(join(stateDir, 'dev.json'), `${JSON.stringify({ url, token, limitedToken, adminToken, redisUrl }, null, 2)}\n`, { mode: 0o600 });
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
  const lanes = (m) => m.groups.map((g) => (g.pool === undefined ? g.tier : `host pool ${g.pool}`)).join(', ');
  // The extra worker the next steps show: one of your modules' (else the examples') first tier or pool.
  const sample = modules.find((m) => !m.examples) ?? modules[0] ?? serversFiles[0];
  const group = sample.groups.find((g) => g.tier === 'host') ?? sample.groups[0];
  const keyArgs = [`--secret ${sh(display(keys.signingSecret))}`, `--tier ${group.tier}`, ...(group.pool === undefined ? [] : [`--pool ${sh(group.pool)}`]), ...(prefix === 'forge' ? [] : [`--prefix ${sh(prefix)}`])];
  const workerEnv = [`REDIS_URL=${sh(shownRedisUrl(redisUrl))}`, ...(prefix === 'forge' ? [] : [`FORGE_PREFIX=${sh(prefix)}`])];
  const workerArgs = [`--tier ${group.tier}`, ...(group.pool === undefined ? [] : [`--pool ${sh(group.pool)}`]), `${sample.servers === undefined ? '--tools' : '--mcp'} ${sh(display(sample.path))}`];
  const examples = modules.some((m) => m.examples);
  const tryLines = examples
    ? [
        `  curl -s -X POST '${url}/v1/calls?wait=5000' -H "authorization: Bearer $FORGE_TOKEN" -H 'content-type: application/json' -d '{"name":"wasm_add","arguments":{"a":2,"b":40}}'`,
        `  curl -s -X POST '${url}/v1/calls?wait=5000' -H "authorization: Bearer $FORGE_TOKEN" -H 'content-type: application/json' -d '{"name":"http_get","arguments":{"url":"${url}/healthz"}}'`,
        '  npm run demo        # an example agent calling tools of every tier',
      ]
    : [];
  if (sample.tools !== undefined && !sample.examples) tryLines.push(`  npx forge call ${sh(sample.tools[0])} '{}' --wait    # one of yours (give it the arguments its schema asks for)`);
  say(`
Forge Fleet ${pkg.version} is running at ${url}
${[
  ...modules.map((m) => `  ${m.label}: workers for ${lanes(m)} (tools: ${m.tools.join(', ')})`),
  ...serversFiles.map((f) => `  ${f.label}: workers for ${lanes(f)} (MCP servers: ${mcpServers.filter((s) => s.file === f).map(serverText).join(', ')})`),
].join('\n')}
  keys: ${display(keysDir)} (${keys.made ? 'made now' : 'reused'}${relative(root, keysDir) === join('.forge', 'keys') ? ', git-ignored' : ''}; tokens minted from ${display(keys.tokenKey)} work here)
  dev token (agent 'dev', grants every Host-tier tool, valid 24 h):
    export FORGE_TOKEN=${token}
  web console: ${url}/ui — sign in with this admin token (user 'dev-admin', valid 24 h):
    ${adminToken}
  logs: ${display(logDir)}

Try it:
  curl -s ${url}/v1/tools -H "authorization: Bearer $FORGE_TOKEN"
${tryLines.join('\n')}

Next steps:
  an approver token (decides calls waiting for a person: npx forge approvals, the web console):
    export APPROVER=$(npx forge token mint --key ${sh(display(keys.tokenKey))} --sub alice --role approver)
  one more worker for this fleet (another terminal, from this directory):
    ${workerEnv.join(' ')} FORGE_CALL_KEY=$(npx forge keys worker-key ${keyArgs.join(' ')}) npx forge-worker ${workerArgs.join(' ')}

Ctrl-C stops the fleet.`);
} catch (error) {
  if (stopping === undefined) {
    fail(error instanceof Error ? error.message : String(error));
    await stopAll(1);
  }
}
