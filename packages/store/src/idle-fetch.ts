import { type BackendFactory, createRedisBackend, type RedisQueueBackend } from 'bullmq';
import type { RedisConnection } from './redis.js';
import { luaScriptAtOnce } from './scripts.js';

/**
 * Whether a pack's queue holds nothing a worker could fetch now or later
 * (waiting, prioritized or delayed jobs); when it holds nothing, takes the
 * queue's base marker away, atomically with the look. KEYS: wait,
 * prioritized, delayed, marker. Returns 1 when there is something, else 0.
 *
 * BullMQ's workers block on the marker (`BZPOPMIN`) and every job added puts
 * it back, so taking it away from an empty queue loses no job: the next add
 * wakes the workers again. Only the base marker (member "0") is taken: the
 * delayed-job marker carries the time of the next delayed job.
 */
export const EMPTY_QUEUE = `
if redis.call('LLEN', KEYS[1]) > 0 or redis.call('ZCARD', KEYS[2]) > 0 or redis.call('ZCARD', KEYS[3]) > 0 then return 1 end
redis.call('ZREM', KEYS[4], '0')
return 0`;

/** What BullMQ's `moveToActive` answers when there is no job: no data, no id, no rate limit, no delayed job. */
const NO_JOB: unknown[] = [null, 0, 0, 0];

/**
 * A BullMQ backend factory for workers (`new Worker(name, processor, options,
 * idleFetch(redis))`) whose fetch after a wake-up costs one small script
 * instead of three round trips.
 *
 * An idle BullMQ worker blocks on the queue's marker. When a job comes, it
 * runs `moveToActive`, which hands the job out and puts the marker back for
 * other workers whether or not more jobs wait; then, with a call slot still
 * spare, it runs `moveToActive` again (empty), blocks on the marker (which is
 * there, so it returns at once) and runs `moveToActive` a third time (empty)
 * before it blocks for real. For a lone call that is three of the worker's
 * Redis round trips and two of Redis's heaviest scripts (seen with `strace`
 * and `MONITOR`), and the next call's submit waits in Redis behind them.
 *
 * Here the fetch that follows a job taken on a wake-up first asks
 * {@link EMPTY_QUEUE}: an empty queue loses its marker in the same script and
 * the fetch answers "no job" without running `moveToActive`, so the worker
 * blocks at once and wakes on the next add. A queue that holds more gets the
 * real `moveToActive`, as before. Fetches under load (no wake-up between
 * them) are untouched.
 *
 * @param redis a connection of the worker's own, on which the look is sent
 * @param base builds the backend whose fetch this one saves. @defaultValue BullMQ's Redis backend
 */
export function idleFetch(redis: RedisConnection, base: BackendFactory<RedisQueueBackend> = createRedisBackend): BackendFactory<RedisQueueBackend> {
  const emptyQueue = luaScriptAtOnce<number>(redis, EMPTY_QUEUE);
  return (name, options, how) => {
    const backend = base(name, options, how);
    const waitForJob = backend.waitForJob.bind(backend);
    const moveToActive = backend.moveToActive.bind(backend);
    /** A wake-up came since the last fetch: the next fetch is the one that answers it. */
    let woken = false;
    /** The last fetch answered a wake-up with a job: the next one asks whether anything is left first. */
    let tookOnWake = false;
    backend.waitForJob = (blockTimeout) => {
      woken = true;
      tookOnWake = false;
      return waitForJob(blockTimeout);
    };
    backend.moveToActive = async (token, workerName): Promise<unknown[]> => {
      const answersWake = woken;
      woken = false;
      if (tookOnWake) {
        tookOnWake = false;
        const keys = backend.keys;
        if ((await emptyQueue([keys.wait!, keys.prioritized!, keys.delayed!, keys.marker!], [])) === 0) return NO_JOB;
      }
      const fetched: unknown[] = await moveToActive(token, workerName);
      tookOnWake = answersWake && fetched[0] != null;
      return fetched;
    };
    return backend;
  };
}
