import { createHash } from 'node:crypto';
import { Command } from 'ioredis';
import type { RedisConnection } from './redis.js';

/**
 * Returns a function that runs a Lua script: by EVALSHA, falling back to
 * EVAL when the server does not hold the script (a restart, a SCRIPT FLUSH).
 * A script of a fixed number of keys is defined once per connection as an
 * ioredis command, which does just that.
 *
 * A script of a variable number of keys is sent as a plain EVALSHA (EVAL when
 * the server does not know it yet), not as a command defined on the
 * connection: ioredis's auto-pipelining files a defined command under the
 * slot of its first argument, which for `numkeys key…` is the key count. On a
 * Redis Cluster the script would be queued with the commands of whichever
 * shard serves the slot of "2", and the pipeline refused. EVALSHA is a command
 * ioredis knows, so it finds the keys where they are (the ioredis pinned here
 * does; older ones did not: redis/ioredis#2109). Fixed-arity scripts are
 * unaffected: their first argument is their first key.
 */
export function luaScript<R>(
  redis: RedisConnection,
  name: string,
  numberOfKeys: number | 'variable',
  lua: string,
): (keys: readonly string[], args: readonly (string | number)[]) => Promise<R> {
  if (numberOfKeys === 'variable') return variableKeyScript(redis, lua, (sha, keys, args) => redis.evalsha(sha, keys.length, ...keys, ...args));
  const commands = redis as unknown as Record<string, (...a: (string | number)[]) => Promise<R>>;
  if (typeof commands[name] !== 'function') redis.defineCommand(name, { numberOfKeys, lua });
  return (keys, args) => {
    if (keys.length !== numberOfKeys) throw new Error(`script ${name} takes ${numberOfKeys} keys, got ${keys.length}`);
    return commands[name]!(...keys, ...args);
  };
}

/**
 * A variable-key script (as {@link luaScript}) whose EVALSHA is written to the
 * connection when called, not at the end of the turn with the connection's
 * auto-pipeline: for a step that is alone (see StepBatch), where waiting for
 * the turn only lets other commands go first. Replies still come in the
 * order commands were written, so nothing else on the connection is
 * reordered.
 */
export function luaScriptAtOnce<R>(redis: RedisConnection, lua: string): (keys: readonly string[], args: readonly (string | number)[]) => Promise<R> {
  return variableKeyScript(redis, lua, (sha, keys, args) => redis.sendCommand(new Command('evalsha', [sha, keys.length, ...keys, ...args], { replyEncoding: 'utf8' })) as Promise<unknown>);
}

/** Runs a variable-key script by `evalsha`, and by EVAL when the server does not hold it. */
function variableKeyScript<R>(
  redis: RedisConnection,
  lua: string,
  evalsha: (sha: string, keys: readonly string[], args: readonly (string | number)[]) => Promise<unknown>,
): (keys: readonly string[], args: readonly (string | number)[]) => Promise<R> {
  const sha = createHash('sha1').update(lua).digest('hex');
  return async (keys, args) => {
    try {
      return (await evalsha(sha, keys, args)) as R;
    } catch (error) {
      if (!(error instanceof Error) || !error.message.startsWith('NOSCRIPT')) throw error;
      return (await redis.eval(lua, keys.length, ...keys, ...args)) as R;
    }
  };
}

const FINAL = `local function final(st) return st == 'completed' or st == 'failed' or st == 'cancelled' end`;

/**
 * Creates a call record unless the id is taken (in any lane); returns 0 when
 * created, else the lane that holds the existing record. KEYS: the id's lane
 * index, the record; ARGV: retention ms, lane, then the record's fields. The
 * index outlives the record's first retention period twice over: a call's
 * record stays findable by id for as long as it is kept.
 */
export const CREATE_CALL = `
local lane = redis.call('GET', KEYS[1])
if lane then return lane end
redis.call('SET', KEYS[1], ARGV[2], 'PX', tonumber(ARGV[1]) * 2)
redis.call('HSET', KEYS[2], unpack(ARGV, 3))
redis.call('PEXPIRE', KEYS[2], ARGV[1])
return 0`;

/**
 * CREATE_CALL for every call of one submit flush, in one script: a flush of
 * 64 calls is one command (and, sent by EVAL, one copy of the script text)
 * instead of 64. KEYS: per call, its lane index then its record. ARGV[1]: the
 * retention ms; then per call the number of values that follow, its lane and
 * its record's fields. Returns per call what CREATE_CALL returns. Single
 * Redis server only: the keys lie in as many slots as there are calls.
 */
export const CREATE_CALLS = `
local retention = tonumber(ARGV[1])
local out = {}
local a = 2
for i = 1, #KEYS / 2 do
  local n = tonumber(ARGV[a])
  local lane = redis.call('GET', KEYS[2 * i - 1])
  if lane then
    out[i] = lane
  else
    redis.call('SET', KEYS[2 * i - 1], ARGV[a + 1], 'PX', retention * 2)
    redis.call('HSET', KEYS[2 * i], unpack(ARGV, a + 2, a + n))
    redis.call('PEXPIRE', KEYS[2 * i], retention)
    out[i] = 0
  end
  a = a + n + 1
end
return out`;

/**
 * A worker takes a call. Returns {outcome, starts, runs}: 'started';
 * 'redelivered' (the call was already running: its previous worker was lost);
 * or why it must not run: 'missing', 'superseded' (ARGV[3], the job's
 * submission token, is not the record's: the job came from a second
 * submission of a taken id), 'final', 'not_approved', 'cancelled', 'expired'.
 *
 * With KEYS[2] (the envelope's execution record, in the call's slot), ARGV[4]
 * (this run's id) and ARGV[5] (when the record may go, epoch ms), a taken call
 * also counts its run there, in the same step: `runs` is how many runs the
 * envelope has had, this one included (see Executions in keys.ts).
 */
export const START_CALL = `${FINAL}
local st = redis.call('HGET', KEYS[1], 'status')
if not st then return {'missing', 0} end
if ARGV[3] and ARGV[3] ~= '' and redis.call('HGET', KEYS[1], 'token') ~= ARGV[3] then return {'superseded', 0} end
if final(st) then return {'final', 0} end
if st == 'awaiting_approval' then return {'not_approved', 0} end
if redis.call('HGET', KEYS[1], 'cancel') == '1' then return {'cancelled', 0} end
local deadline = tonumber(redis.call('HGET', KEYS[1], 'deadline') or '')
if st == 'queued' and deadline and tonumber(ARGV[1]) > deadline then return {'expired', 0} end
local starts = redis.call('HINCRBY', KEYS[1], 'starts', 1)
redis.call('HSET', KEYS[1], 'status', 'running', 'worker', ARGV[2], 'startedAt', ARGV[1])
local runs = 0
if KEYS[2] then
  redis.call('HSET', KEYS[2], ARGV[4], 1)
  redis.call('PEXPIREAT', KEYS[2], ARGV[5])
  runs = redis.call('HLEN', KEYS[2])
end
if st == 'running' then
  redis.call('HDEL', KEYS[1], 'progress')
  return {'redelivered', starts, runs}
end
return {'started', starts, runs}`;

/**
 * Ends a call exactly once. Returns the dispatchers still to notify (the
 * submitter first, then watchers), or nil when the call had already ended
 * (or, with ARGV[5], was not in that status).
 *
 * With KEYS[3] (the submitter's reply list), ARGV[6] (the reply) and ARGV[7]
 * (the submitter's id), the reply is pushed here, in the same step, when the
 * record's submitter is that one, saving the worker a round trip on the hot
 * path. KEYS[3] lies in another hash slot than the call, so this form is for
 * a single Redis server only; ARGV[8] is the reply list's time to live.
 */
export const FINISH_CALL = `${FINAL}
local st = redis.call('HGET', KEYS[1], 'status')
if not st or final(st) then return false end
if ARGV[5] and ARGV[5] ~= '' and st ~= ARGV[5] then return false end
redis.call('HSET', KEYS[1], 'status', ARGV[1], 'result', ARGV[2], 'finishedAt', ARGV[3])
redis.call('HDEL', KEYS[1], 'worker', 'cancel')
redis.call('PEXPIRE', KEYS[1], ARGV[4])
local targets = redis.call('SMEMBERS', KEYS[2])
redis.call('DEL', KEYS[2])
local submitter = redis.call('HGET', KEYS[1], 'replyTo')
if KEYS[3] and submitter == ARGV[7] then
  redis.call('LPUSH', KEYS[3], ARGV[6])
  redis.call('PEXPIRE', KEYS[3], ARGV[8])
else
  table.insert(targets, 1, submitter)
end
return targets`;

/**
 * Withdraws a call that was recorded and enqueued in one step but found to
 * have no live worker: deleted with its lane index (so the id stays free and
 * its job is skipped as 'missing') only while still queued under the same
 * submission token. Returns 1 when withdrawn, 0 when a worker had already
 * taken it.
 */
export const VOID_CALL = `
if redis.call('HGET', KEYS[1], 'status') ~= 'queued' or redis.call('HGET', KEYS[1], 'token') ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1], KEYS[2])
return 1`;

/**
 * A running call's tool reported progress: kept on the record (for readers of
 * the call) while the reporting worker still holds it. Returns the
 * dispatchers to tell (submitter first, then watchers), or nil when the call
 * is no longer that worker's running call (ended, lost, retried elsewhere).
 * ARGV: worker id, progress JSON.
 */
export const PROGRESS_CALL = `
if redis.call('HGET', KEYS[1], 'status') ~= 'running' or redis.call('HGET', KEYS[1], 'worker') ~= ARGV[1] then return false end
redis.call('HSET', KEYS[1], 'progress', ARGV[2])
local targets = redis.call('SMEMBERS', KEYS[2])
table.insert(targets, 1, redis.call('HGET', KEYS[1], 'replyTo'))
return targets`;

/**
 * A resubmission takes over a call still waiting in its queue: its record gets
 * the resubmission's token and envelope, so the job enqueued next with them is
 * the one that runs, and any earlier job of the call is skipped as
 * superseded. Used when a call's record may have been written without its job
 * (Redis died between the two): without it, such a call would wait for ever.
 * Only while queued and not cancelled: a call a worker has started is left
 * alone. Returns 1 when taken over. ARGV: token, envelope JSON.
 */
export const ADOPT_CALL = `
if redis.call('HGET', KEYS[1], 'status') ~= 'queued' or redis.call('HGET', KEYS[1], 'cancel') == '1' then return 0 end
redis.call('HSET', KEYS[1], 'token', ARGV[1], 'envelope', ARGV[2])
return 1`;

/** A running call goes back to the queue (a retry after a transient failure). */
export const REQUEUE_CALL = `
if redis.call('HGET', KEYS[1], 'status') ~= 'running' then return 0 end
redis.call('HSET', KEYS[1], 'status', 'queued')
redis.call('HDEL', KEYS[1], 'worker', 'progress')
return 1`;

/**
 * A dispatcher that did not submit a call starts waiting for it: it joins the
 * watchers unless the call already ended. Returns the record (empty if none),
 * read in the same step, so no result can slip between the check and the wait.
 */
export const WATCH_CALL = `${FINAL}
local h = redis.call('HGETALL', KEYS[1])
if #h == 0 then return h end
local st = redis.call('HGET', KEYS[1], 'status')
if not final(st) and redis.call('HGET', KEYS[1], 'replyTo') ~= ARGV[1] then
  redis.call('SADD', KEYS[2], ARGV[1])
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
end
return h`;

/**
 * Cancels a call. Queued (or waiting for approval): it ends now, returns
 * {'cancelled', targets…}. Running: it is flagged for its worker, returns
 * {'running'}. Otherwise {'final'} or {'missing'}.
 */
export const CANCEL_CALL = `${FINAL}
local st = redis.call('HGET', KEYS[1], 'status')
if not st then return {'missing'} end
if final(st) then return {'final'} end
if st == 'running' then
  redis.call('HSET', KEYS[1], 'cancel', '1')
  return {'running'}
end
redis.call('HSET', KEYS[1], 'status', 'cancelled', 'result', ARGV[1], 'finishedAt', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
local targets = redis.call('SMEMBERS', KEYS[2])
redis.call('DEL', KEYS[2])
table.insert(targets, 1, redis.call('HGET', KEYS[1], 'replyTo'))
return {'cancelled', unpack(targets)}`;

/**
 * A worker announces (or renews) its tools and its pack. Refuses, and returns
 * {name, live others, …}, when another live worker serves one of the names
 * with a different definition (name '' for a pack another live worker serves
 * with other tools: a named pack, `forge-worker --pack`); else records every definition, the pack, and
 * this worker's leases on the pack and on each tool, bumps the lane's version
 * when a definition or the pack changed (a renewal of the same list writes
 * neither), and returns {}.
 * With takeover ('1'), a definition that another live worker serves
 * otherwise is replaced rather than refused (never a pack: a named pack's
 * workers share one queue, so their tools must match): a worker whose MCP
 * server changed its list takes the tool's name, its pack becomes where the
 * tool's calls go, and the other workers' packs serve it no more under the
 * old definition until they take the change too.
 * KEYS: the lane's definitions, its packs, this pack's leases, the lane's
 * version, then one lease set per tool. ARGV: worker id, now, lease expiry,
 * pack id, pack JSON, takeover ('1' or '0'), then name and definition JSON per tool.
 */
export const ANNOUNCE_TOOLS = `
local n = #KEYS - 4
local takeover = ARGV[6] == '1'
local conflicts = {}
local differs = {}
for j = 1, n do
  local name = ARGV[5 + 2 * j]
  local existing = redis.call('HGET', KEYS[1], name)
  differs[j] = existing ~= ARGV[6 + 2 * j]
  if existing and differs[j] and not takeover then
    redis.call('ZREMRANGEBYSCORE', KEYS[4 + j], '-inf', ARGV[2])
    local others = redis.call('ZCARD', KEYS[4 + j])
    if redis.call('ZSCORE', KEYS[4 + j], ARGV[1]) then others = others - 1 end
    if others > 0 then
      table.insert(conflicts, name)
      table.insert(conflicts, others)
    end
  end
end
local pack = redis.call('HGET', KEYS[2], ARGV[4])
if pack and pack ~= ARGV[5] then
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', ARGV[2])
  local others = redis.call('ZCARD', KEYS[3])
  if redis.call('ZSCORE', KEYS[3], ARGV[1]) then others = others - 1 end
  if others > 0 then
    table.insert(conflicts, '')
    table.insert(conflicts, others)
  end
end
if #conflicts > 0 then return conflicts end
local changed = false
for j = 1, n do
  if differs[j] then
    redis.call('HSET', KEYS[1], ARGV[5 + 2 * j], ARGV[6 + 2 * j])
    changed = true
  end
  redis.call('ZADD', KEYS[4 + j], ARGV[3], ARGV[1])
end
if pack ~= ARGV[5] then
  redis.call('HSET', KEYS[2], ARGV[4], ARGV[5])
  changed = true
end
if changed then redis.call('INCR', KEYS[4]) end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', ARGV[2])
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[1])
return {}`;

/**
 * A worker renews the leases of a list it announced, without sending the
 * list again (5,000 MCP tools are 16 MB of definitions every few seconds).
 * While every lease of the worker is live, no other worker can have changed
 * one of its definitions or its pack (ANNOUNCE_TOOLS refuses a change while
 * another live worker serves the name), so there is nothing to compare. It
 * renews only when each lease is still live and each definition and the
 * pack are still there; otherwise (a lease let lapse, a Redis that lost its
 * data) it writes nothing and returns 0, and the worker announces in full.
 * KEYS: the lane's definitions, its packs, this pack's leases, then one
 * lease set per tool. ARGV: worker id, now, lease expiry, pack id, then one
 * name per tool. Returns 1 when renewed.
 */
export const RENEW_LEASES = `
local now = tonumber(ARGV[2])
if redis.call('HEXISTS', KEYS[2], ARGV[4]) == 0 then return 0 end
for i = 3, #KEYS do
  local expiry = redis.call('ZSCORE', KEYS[i], ARGV[1])
  if not expiry or tonumber(expiry) <= now then return 0 end
  if i > 3 and redis.call('HEXISTS', KEYS[1], ARGV[1 + i]) == 0 then return 0 end
end
for i = 3, #KEYS do redis.call('ZADD', KEYS[i], ARGV[3], ARGV[1]) end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', ARGV[2])
return 1`;

/**
 * Removes a worker's own pack (see directPackOf) from its lane's catalog once
 * no worker holds a live lease on it: dispatchers stop reading it, and a
 * worker that comes back announces it again in full (RENEW_LEASES finds it
 * gone). KEYS: the lane's packs, the pack's leases, the lane's version. ARGV:
 * pack id, now. Returns 1 when removed.
 */
export const PRUNE_PACK = `
if redis.call('ZCOUNT', KEYS[2], '(' .. ARGV[2], '+inf') > 0 then return 0 end
if redis.call('HDEL', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('DEL', KEYS[2])
redis.call('INCR', KEYS[3])
return 1`;

/**
 * Whether a BullMQ queue holds no call to run (no job waiting, delayed,
 * prioritized, paused, running or waiting for children); when it holds no job
 * at all, also deletes what BullMQ keeps beside its jobs (meta, id counter,
 * events, stall check, marker…), which nothing reads once its workers are
 * gone. KEYS: wait, delayed, prioritized, paused, active, waiting-children,
 * failed, completed, then the keys to delete. Returns 1 when it holds no call.
 */
export const DROP_IDLE_QUEUE = `
for i = 1, 6 do
  if redis.call('EXISTS', KEYS[i]) == 1 then return 0 end
end
if redis.call('EXISTS', KEYS[7]) == 0 and redis.call('EXISTS', KEYS[8]) == 0 then
  for i = 9, #KEYS do redis.call('DEL', KEYS[i]) end
end
return 1`;

/**
 * A person approved a call waiting for approval: it becomes queued (its job
 * is enqueued next), with who decided and, for a modification, the envelope
 * that will run. Returns {'ok'}, {'expired'} when its approval deadline has
 * passed, or {'not_waiting', status} ({'missing'} for no record).
 * ARGV: now, decided by, decision, new envelope JSON ('' to keep).
 */
export const APPROVE_CALL = `
local st = redis.call('HGET', KEYS[1], 'status')
if not st then return {'missing'} end
if st ~= 'awaiting_approval' then return {'not_waiting', st} end
local deadline = tonumber(redis.call('HGET', KEYS[1], 'approvalDeadline') or '')
if deadline and tonumber(ARGV[1]) > deadline then return {'expired'} end
redis.call('HSET', KEYS[1], 'status', 'queued', 'decidedBy', ARGV[2], 'decision', ARGV[3], 'decidedAt', ARGV[1])
if ARGV[4] ~= '' then redis.call('HSET', KEYS[1], 'envelope', ARGV[4]) end
redis.call('HDEL', KEYS[1], 'reason')
return {'ok'}`;

/**
 * One script run for many calls: wraps a per-call script (one that reads
 * only its KEYS and ARGV) so that a single EVALSHA applies it to each call in
 * turn. KEYS: every call's keys, one call after the other. ARGV: per call,
 * its number of keys, its number of arguments, then its arguments. Returns
 * per call what the script returns, or an error reply in that call's place
 * when its part raised one (the others still run). Single Redis server only:
 * the calls' keys lie in different slots.
 */
export function batchScript(lua: string): string {
  return `local function one(KEYS, ARGV)
${lua}
end
local out = {}
local k, a, i = 1, 1, 1
while a <= #ARGV do
  local nk, na = tonumber(ARGV[a]), tonumber(ARGV[a + 1])
  local ok, reply = pcall(one, {unpack(KEYS, k, k + nk - 1)}, {unpack(ARGV, a + 2, a + 1 + na)})
  if ok then out[i] = reply
  elseif type(reply) == 'table' and reply.err then out[i] = reply
  else out[i] = {err = tostring(reply)} end
  k, a, i = k + nk, a + 2 + na, i + 1
end
return out`;
}

/**
 * Counts the calls in some of a queue's jobs: KEYS are job-id lists (BullMQ's
 * `wait` and `active`); ARGV[1] is the queue's key prefix (`<prefix>:<queue>:`).
 * A batch job is named `batch-<n>` (see TierQueues), any other carries one
 * call. Returns one count per list. Reads only; O(jobs), for operators' views.
 */
export const COUNT_CALLS = `
local counts = {}
for k = 1, #KEYS do
  local total = 0
  for _, id in ipairs(redis.call('LRANGE', KEYS[k], 0, -1)) do
    local name = redis.call('HGET', ARGV[1] .. id, 'name')
    local n = name and tonumber(string.match(name, '^batch%-(%d+)$'))
    total = total + (n or 1)
  end
  counts[k] = total
end
return counts`;

/**
 * Which worker holds a caller's session with an MCP server (see CallerSessions):
 * the holder written there when it is another process's, else this process's
 * (written, with its lease renewed, when `claim` is set or it was already
 * this process's), else nil (no holder, and not claimed).
 * KEYS: the session key. ARGV: holder (`<process>|<queue>`), process, lease ms, claim (1 or 0).
 */
export const CLAIM_CALLER_SESSION = `
local held = redis.call('GET', KEYS[1])
if held then
  local bar = string.find(held, '|', 1, true)
  if bar == nil or string.sub(held, 1, bar - 1) ~= ARGV[2] then return held end
end
if ARGV[4] == '1' or held then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[3])
  return ARGV[1]
end
return false
`;

/**
 * Gives up a caller's session key if it names this holder: this process and this generation's queue (a generation
 * replaced by a newer one of the same process, which took the session over, leaves it alone).
 * KEYS: the session key. ARGV: holder (`<process>|<queue>`).
 */
export const RELEASE_CALLER_SESSION = `
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) return 1 end
return 0
`;
