#!/usr/bin/env node
/**
 * Generates the fleet's Redis ACL file (one least-privilege user per role)
 * from the queue layout and the installed BullMQ's Lua scripts.
 *
 *   npm run redis:acl -- [--prefix forge] [--host-pools a,b] [--out FILE]
 *                        [--template] [--passwords-file .forge/redis-acl.env] [--admin] [--layout]
 *
 * See infra/redis/README.md for what each user may do and why.
 */
import { createHash, randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

// Same rules as FLEET_PREFIX_PATTERN and PoolName in packages/shared: names
// end up inside ACL glob patterns, so glob metacharacters must never get in.
const PREFIX_PATTERN = /^[A-Za-z0-9_-]{1,32}$/;
const POOL_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;
const TIERS = ['platform', 'embedded', 'host'];

/**
 * The queue naming rule of packages/shared/src/queues/names.ts (`queueName`),
 * duplicated because a plain .mjs script cannot import TypeScript source;
 * test/integration/redis-acl.int.test.ts checks that the two agree.
 */
const queueName = (prefix, tier, pool) => (pool === undefined ? `{${prefix}.${tier}}` : `{${prefix}.${tier}.${pool}}`);
/** A queue's lane (names.ts `laneOf`): the key space of its call records, reply lists and cancel channel. */
const laneOf = (tier, pool) => (tier === 'host' && pool !== undefined ? `host.${pool}` : tier);

/** Key patterns of `fleetKeys` (names.ts), and BullMQ's `<prefix>:<queue>:<suffix>` keys. */
const layout = (prefix) => ({
  // The lane's queue and every tool pack's queue of the lane (`{…}.<pack>`): all begin with the lane's hash tag,
  // and the closing brace keeps `{forge.host}*` from matching `{forge.host.gpu}`.
  queueKeys: (tier, pool) => `${prefix}:${queueName(prefix, tier, pool)}*`,
  /** Call records and watchers of one lane, or of every lane with `*`. */
  callKeys: (lane) => `${prefix}:call:${lane}:*`,
  /** The dispatchers' index: which lane holds a call id. */
  laneIndex: `${prefix}:lane:*`,
  replyKeys: (lane) => `${prefix}:replies:${lane}:*`,
  /** Every lane's catalog (dispatchers read it all). */
  catalogKeys: `${prefix}:{${prefix}.catalog}:*`,
  /** One lane's definitions and leases: only its own workers may write them. */
  laneCatalogKeys: (lane) => `${prefix}:{${prefix}.catalog}:${lane}:*`,
  /** The set of lanes that announced tools (workers add their own; SADD of a name is all it allows). */
  catalogLanes: `${prefix}:{${prefix}.catalog}:lanes`,
  /** Each lane's key check: dispatchers write it, workers read theirs at start. */
  keyChecks: `${prefix}:{${prefix}.catalog}:keychecks`,
  /** The audit stream: the audit keeper's user alone writes it (and reads it for `GET /v1/audit`). */
  audit: `${prefix}:{${prefix}.audit}`,
  /** A writer's audit inbox (`dispatcher`, or a worker's lane): RPUSH is all its writer may do there. */
  auditInbox: (writer) => `${prefix}:{${prefix}.audit}:inbox:${writer}`,
  /** One lane's execution records (the replay barrier): its own workers alone, not the dispatchers. */
  executions: (lane) => `${prefix}:executions:${lane}:*`,
  /** The calls waiting for a person, by deadline: dispatchers index them and sweep the expired. */
  approvals: `${prefix}:{${prefix}.approvals}`,
  catalogChannel: `${prefix}:catalog-changed`,
  cancelChannel: (lane) => `${prefix}:cancel:${lane}`,
  mcpCancelChannel: `${prefix}:mcp-cancel`,
});

/**
 * Call sites in BullMQ's scripts whose command is a variable, with every
 * command the variable can hold (read off the scripts). A site not listed
 * here stops the generator: after a BullMQ upgrade someone has to look.
 */
const DYNAMIC_COMMANDS = {
  'paginate-1.lua countCommand': ['scard', 'hlen'],
  'includes/findPage.lua command': ['sscan', 'hscan'],
  'includes/addJobInTargetList.lua pushCmd': ['lpush', 'rpush'],
};

/**
 * The commands BullMQ's Lua scripts call (Redis checks each one against the
 * ACL at call time), from every script reachable from the non-relay entry
 * scripts. Relay scripts serve BullMQ's Relay feature, which the fleet does
 * not use.
 */
function bullmqScriptCommands() {
  const commandsDir = join(dirname(fileURLToPath(import.meta.resolve('bullmq'))), 'commands');
  const entries = readdirSync(commandsDir).filter((f) => f.endsWith('.lua') && !f.startsWith('relay'));
  const seen = new Set();
  const commands = new Set();
  const visit = (file) => {
    if (seen.has(file)) return;
    seen.add(file);
    const text = readFileSync(join(commandsDir, file), 'utf8');
    // Includes are relative to the including script.
    for (const [, include] of text.matchAll(/^--- @include "([^"]+)"/gm)) visit(join(dirname(file), `${include}.lua`));
    for (const [, name] of text.matchAll(/\b(?:rcall|redis\.p?call)\(\s*["']([A-Za-z]+)["']/g)) commands.add(name.toLowerCase());
    for (const [, variable] of text.matchAll(/\b(?:rcall|redis\.p?call)\(\s*([A-Za-z_][A-Za-z0-9_]*)\s*[,)]/g)) {
      const known = DYNAMIC_COMMANDS[`${file} ${variable}`];
      if (known === undefined) throw new Error(`BullMQ script ${file} calls a command held in '${variable}'; add what it can hold to DYNAMIC_COMMANDS in scripts/redis-acl.mjs`);
      for (const c of known) commands.add(c);
    }
  };
  for (const entry of entries) visit(entry);
  if (commands.size === 0) throw new Error(`no redis.call found under ${commandsDir}; has BullMQ's layout changed?`);
  return [...commands].sort();
}

/** Every connection: ioredis's ready check (INFO), connection names, the dispatcher's health check. */
// `cluster|slots` and `cluster|info`: a Redis Cluster client reads the slot map and the cluster's state with them
// (read-only; on a single server they answer an error and change nothing).
const CONNECTION = ['ping', 'info', 'client|setname', 'cluster|slots', 'cluster|info'];

/**
 * What BullMQ itself sends outside its scripts on the fleet's paths: scripts
 * (EVALSHA, falling back to EVAL), the Worker's blocking wait for a job
 * (BZPOPMIN on the queue's marker) and QueueEvents' XREAD. MULTI/EXEC (flows,
 * job logs) and SCAN (obliterate) are left out on purpose.
 */
const BULLMQ_DIRECT = ['evalsha', 'eval', 'bzpopmin', 'xread'];

/** Our own commands outside scripts (packages/store, apps/*). */
const FLEET = {
  // HSET: the lanes' key checks; LLEN/ZCARD: the pack queues' backlog, read with the catalog.
  dispatcher: ['hgetall', 'hget', 'hset', 'smembers', 'get', 'del', 'blmpop', 'lpush', 'pexpire', 'zcount', 'zcard', 'llen', 'publish', 'subscribe', 'unsubscribe'],
  // HGET: its lane's key check, at start. HSET/HLEN/PEXPIREAT: the claim of a run on its lane's execution records.
  worker: ['hget', 'hset', 'hlen', 'pexpireat', 'zrem', 'zcount', 'sadd', 'lpush', 'pexpire', 'publish', 'subscribe', 'unsubscribe'],
  // Files the inboxes into the stream (LRANGE, XADD, LTRIM in one script) and reads it for GET /v1/audit.
  audit: ['lrange', 'ltrim', 'xadd', 'xrevrange', 'xrange', 'xlen'],
};

/**
 * A writer's one permission on the audit: a selector (Redis 7) allowing RPUSH
 * on its own inbox and nothing else. Outside a selector, the key would share
 * the user's other commands (DEL, PEXPIRE, the scripts' commands…), and any of
 * them could take entries back; RPUSH has no way to remove anything.
 */
const appendOnly = (inbox) => `(%W~${inbox} +rpush)`;

const uniqueSorted = (list) => [...new Set(list)].sort();

/** Environment variable holding a user's password (`forge-worker-host-gpu-a` → FORGE_REDIS_PASSWORD_WORKER_HOST_GPU_A). */
const passwordVar = (role) => `FORGE_REDIS_PASSWORD_${role.toUpperCase().replace(/-/g, '_')}`;

/**
 * The fleet's users and what each may touch. `role` is the user name without
 * the prefix; user names carry the fleet prefix so fleets sharing one Redis
 * do not collide.
 */
function fleetUsers({ prefix, hostPools, admin }) {
  if (!PREFIX_PATTERN.test(prefix)) throw new Error(`prefix '${prefix}' must match ${PREFIX_PATTERN}`);
  for (const pool of hostPools) if (!POOL_PATTERN.test(pool)) throw new Error(`host pool '${pool}' must match ${POOL_PATTERN}`);
  const k = layout(prefix);
  const script = bullmqScriptCommands();
  const queueUser = [...CONNECTION, ...BULLMQ_DIRECT, ...script];
  const allQueues = [
    ...TIERS.map((tier) => ({ tier, pool: undefined })),
    ...hostPools.map((pool) => ({ tier: 'host', pool })),
  ];
  const users = [
    {
      role: 'dispatcher',
      queues: allQueues.map(({ tier, pool }) => queueName(prefix, tier, pool)),
      commands: uniqueSorted([...queueUser, ...FLEET.dispatcher]),
      keys: [...allQueues.map(({ tier, pool }) => `~${k.queueKeys(tier, pool)}`), `~${k.callKeys('*')}`, `~${k.laneIndex}`, `~${k.replyKeys('*')}`, `~${k.approvals}`, `%R~${k.catalogKeys}`, `~${k.keyChecks}`],
      channels: [k.catalogChannel, k.cancelChannel('*'), k.mcpCancelChannel],
      selectors: [appendOnly(k.auditInbox('dispatcher'))],
    },
    {
      // The audit keeper (each dispatcher runs one, with FORGE_AUDIT_REDIS_URL): the only user that writes the stream.
      role: 'audit',
      queues: [],
      commands: uniqueSorted([...CONNECTION, 'evalsha', 'eval', ...FLEET.audit]),
      keys: [`~${k.audit}`, `~${k.auditInbox('*')}`],
      channels: [],
      selectors: [],
    },
    ...allQueues.map(({ tier, pool }) => ({
      role: pool === undefined ? `worker-${tier}` : `worker-${tier}-${pool}`,
      queues: [queueName(prefix, tier, pool)],
      commands: uniqueSorted([...queueUser, ...FLEET.worker]),
      // Only its own lane's call records and reply lists. (The EVAL that ends a call declares the submitter's reply
      // list as a key, and Redis wants read and write on every declared key: the lane's reply lists are read-write.)
      keys: [`~${k.queueKeys(tier, pool)}`, `~${k.callKeys(laneOf(tier, pool))}`, `~${k.replyKeys(laneOf(tier, pool))}`, `~${k.laneCatalogKeys(laneOf(tier, pool))}`, `~${k.catalogLanes}`, `%R~${k.keyChecks}`, `~${k.executions(laneOf(tier, pool))}`],
      channels: [k.cancelChannel(laneOf(tier, pool)), k.catalogChannel],
      selectors: [appendOnly(k.auditInbox(laneOf(tier, pool)))],
    })),
  ];
  if (admin) {
    users.push({
      role: 'admin',
      queues: allQueues.map(({ tier, pool }) => queueName(prefix, tier, pool)),
      // Operators inspect and repair the fleet's keys; they still cannot reconfigure, flush or switch databases.
      commands: ['@read', '@write', '@keyspace', '@scripting', '@pubsub', '@connection', '@transaction', '-@dangerous', 'info', 'client|list', '-select'],
      keys: [`~${prefix}:*`],
      channels: [`${prefix}:*`],
      selectors: [],
    });
  }
  const vars = new Map();
  for (const u of users) {
    u.name = `${prefix}-${u.role}`;
    u.passwordVar = passwordVar(u.role);
    const other = vars.get(u.passwordVar);
    if (other !== undefined) throw new Error(`users '${other}' and '${u.name}' would share ${u.passwordVar}; rename one of the pools`);
    vars.set(u.passwordVar, u.name);
  }
  return users;
}

/** One ACL file line. `password` undefined: the user is `off` with no password (nobody can log in as it). */
function aclLine(user, password) {
  const auth = password === undefined ? ['off'] : ['on', `#${createHash('sha256').update(password).digest('hex')}`];
  const commands = user.commands.map((c) => (c.startsWith('-') ? c : `+${c}`));
  const channels = user.channels.map((c) => `&${c}`);
  return ['user', user.name, ...auth, 'resetkeys', 'resetchannels', 'clearselectors', '-@all', ...commands, ...user.keys, ...channels, ...user.selectors].join(' ');
}

/** Reads `NAME=value` lines (a previous run's generated passwords). */
function readEnvFile(file) {
  const values = new Map();
  if (!existsSync(file)) return values;
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    const m = /^([A-Z0-9_]+)=(.*)$/.exec(line.trim());
    if (m) values.set(m[1], m[2]);
  }
  return values;
}

const MIN_PASSWORD_LENGTH = 16;

const USAGE = `usage: npm run redis:acl -- [options]
  --prefix P         fleet prefix (FORGE_PREFIX, default forge)
  --host-pools a,b   host pools, one user each (FORGE_HOST_POOLS)
  --out FILE         write the ACL file there (default: stdout)
  --template         every user off, no password: the committed infra/redis/fleet.acl
  --passwords-file F where generated passwords are kept (default .forge/redis-acl.env)
  --admin            add <prefix>-admin
  --layout           print each user's queues, commands, keys and channels as JSON
Passwords come from FORGE_REDIS_PASSWORD_<ROLE> (e.g. FORGE_REDIS_PASSWORD_WORKER_HOST_GPU);
missing ones are generated once and kept in the passwords file. The ACL file holds only their SHA-256.`;

function main() {
  const { values } = parseArgs({
    options: {
      prefix: { type: 'string', default: process.env.FORGE_PREFIX ?? 'forge' },
      'host-pools': { type: 'string', default: process.env.FORGE_HOST_POOLS ?? '' },
      out: { type: 'string' },
      template: { type: 'boolean', default: false },
      'passwords-file': { type: 'string', default: '.forge/redis-acl.env' },
      admin: { type: 'boolean', default: false },
      layout: { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    console.log(USAGE);
    return;
  }
  const hostPools = values['host-pools'].split(',').map((p) => p.trim()).filter((p) => p !== '');
  const users = fleetUsers({ prefix: values.prefix, hostPools, admin: values.admin });

  if (values.layout) {
    console.log(JSON.stringify(users, null, 2));
    return;
  }

  const lines = ['user default off resetkeys resetchannels -@all'];
  const generated = new Map();
  if (values.template) {
    for (const u of users) lines.push(aclLine(u, undefined));
  } else {
    const saved = readEnvFile(values['passwords-file']);
    for (const u of users) {
      let password = process.env[u.passwordVar] ?? saved.get(u.passwordVar);
      if (password !== undefined && password.length < MIN_PASSWORD_LENGTH) throw new Error(`${u.passwordVar} is shorter than ${MIN_PASSWORD_LENGTH} characters`);
      if (password === undefined) generated.set(u.passwordVar, (password = randomBytes(24).toString('base64url')));
      else if (process.env[u.passwordVar] === undefined) generated.set(u.passwordVar, password);
      lines.push(aclLine(u, password));
    }
  }
  const text = `${lines.join('\n')}\n`;
  if (values.out === undefined) process.stdout.write(text);
  else {
    mkdirSync(dirname(values.out), { recursive: true });
    writeFileSync(values.out, text);
  }

  if (generated.size > 0) {
    // Generated (or previously generated) passwords must survive the run, or nobody could log in with them.
    const file = values['passwords-file'];
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(file, [...generated].map(([name, value]) => `${name}=${value}\n`).join(''), { mode: 0o600 });
    chmodSync(file, 0o600);
    console.error(`redis-acl: passwords for ${[...generated.keys()].join(', ')} are in ${file} (keep it out of git; .forge/ is ignored)`);
  }
}

try {
  main();
} catch (error) {
  console.error(`redis-acl: ${error instanceof Error ? error.message : String(error)}`);
  process.exitCode = 1;
}
