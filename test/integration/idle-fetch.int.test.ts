import { type BackendFactory, createRedisBackend, Queue, type RedisQueueBackend, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { EMPTY_QUEUE, idleFetch } from '@forge-fleet/store';
import { deleteKeysOf, redisUrl, testPrefix } from '../fixtures/redis.js';
import { until } from '../fixtures/wait.js';

/** Everything a test opened, closed after it. */
const opened: { close(): Promise<unknown> }[] = [];
/** A connection that reads CLIENT LIST. */
let looker: Redis | undefined;
afterEach(async () => {
  looker = undefined;
  for (const thing of opened.splice(0).reverse()) await thing.close().catch(() => undefined);
});

function connection(): Redis {
  const redis = new Redis(redisUrl(), { maxRetriesPerRequest: null });
  opened.push({ close: () => redis.quit() });
  return redis;
}

/** BullMQ's Redis backend, counting the `moveToActive` scripts it sends. */
function countingBackend(): { factory: BackendFactory<RedisQueueBackend>; moves: () => number } {
  let moves = 0;
  const factory: BackendFactory<RedisQueueBackend> = (name, options, how) => {
    const backend = createRedisBackend(name, options, how);
    const moveToActive = backend.moveToActive.bind(backend);
    backend.moveToActive = (token, workerName) => {
      moves++;
      return moveToActive(token, workerName);
    };
    return backend;
  };
  return { factory, moves: () => moves };
}

/** Whether the worker of queue `name` (under `prefix`) is blocked on its marker now. */
async function blocked(prefix: string, name: string): Promise<boolean> {
  const client = `name=${prefix}:${Buffer.from(name).toString('base64')} `;
  const list = (await (looker ??= connection()).client('LIST')) as string;
  return list.split('\n').some((line) => line.includes(client) && line.includes('cmd=bzpopmin') && / flags=\S*b/.test(line));
}

/** A queue and a worker on it (concurrency 4, so BullMQ fetches again while a job runs), processing with `process`. */
async function fleetOf(backend: BackendFactory<RedisQueueBackend>, process: (data: { n: number }) => unknown) {
  const prefix = testPrefix('idle');
  const name = `q${Math.random().toString(36).slice(2, 8)}`;
  // Closed last (after the worker and the queue): the queue's keys go with the test.
  const sweeper = connection();
  opened.push({ close: () => deleteKeysOf(sweeper, prefix) });
  const queue = new Queue(name, { connection: connection(), prefix });
  opened.push(queue);
  const done: number[] = [];
  const worker = new Worker(name, async (job) => {
    await process(job.data as { n: number });
    done.push((job.data as { n: number }).n);
  }, { connection: connection(), prefix, concurrency: 4 }, backend);
  opened.push(worker);
  await worker.waitUntilReady();
  // The worker's first fetch after start is not one that follows a wake-up; let it block first.
  await until('the worker to block on the marker', () => blocked(prefix, name));
  return { queue, worker, done, prefix, name };
}

describe('idleFetch: an idle worker fetches a lone job with one moveToActive', () => {
  it('runs moveToActive once per lone job, where BullMQ alone runs it more', async () => {
    const runs = 4;
    const measure = async (factory: (counting: BackendFactory<RedisQueueBackend>) => BackendFactory<RedisQueueBackend>) => {
      const counting = countingBackend();
      const fleet = await fleetOf(factory(counting.factory), () => undefined);
      const before = counting.moves();
      for (let n = 0; n < runs; n++) {
        await fleet.queue.add('lone', { n });
        // Done as BullMQ sees it (moveToFinished answered), so the next job cannot be taken by the finish's own fetch.
        await until(`lone job ${n} completed`, async () => (await fleet.queue.getCompletedCount()) === n + 1, { intervalMs: 5 });
        // The worker blocks again before the next job comes: each job is a lone job on an idle worker.
        await until('the worker to block again', () => blocked(fleet.prefix, fleet.name), { intervalMs: 5 });
      }
      return (counting.moves() - before) / runs;
    };
    const plain = await measure((counting) => counting);
    const idle = await measure((counting) => idleFetch(connection(), counting));
    expect(idle).toBe(1);
    expect(plain).toBeGreaterThan(idle);
  });

  it('still takes a job that comes while the first one runs', async () => {
    const on: { queue?: Queue } = {};
    const fleet = await fleetOf(idleFetch(connection()), async ({ n }) => {
      // Added while job 0 runs: after the worker's look at the queue, or before it; either way it must run.
      if (n === 0) await on.queue!.add('second', { n: 1 });
    });
    on.queue = fleet.queue;
    await fleet.queue.add('first', { n: 0 });
    await until('both jobs done', () => fleet.done.length === 2);
    expect(fleet.done.sort()).toEqual([0, 1]);
  });

  it('takes every job of a burst, and a delayed job when its time comes', async () => {
    const fleet = await fleetOf(idleFetch(connection()), () => new Promise((resolve) => setImmediate(resolve)));
    await fleet.queue.addBulk(Array.from({ length: 40 }, (_, n) => ({ name: 'burst', data: { n } })));
    await until('the burst done', () => fleet.done.length === 40);
    await fleet.queue.add('later', { n: 40 }, { delay: 300 });
    await fleet.queue.add('now', { n: 41 });
    await until('the delayed job done', () => fleet.done.length === 42);
    expect(new Set(fleet.done).size).toBe(42);
  });
});

describe('EMPTY_QUEUE', () => {
  it('takes the base marker only from a queue with nothing waiting, prioritized or delayed', async () => {
    const redis = connection();
    const p = testPrefix('empty');
    const keys = [`${p}:wait`, `${p}:prioritized`, `${p}:delayed`, `${p}:marker`];
    const look = () => redis.eval(EMPTY_QUEUE, 4, ...keys);
    await redis.zadd(keys[3]!, 0, '0');
    for (const [key, fill] of [[keys[0]!, () => redis.lpush(keys[0]!, 'job')], [keys[1]!, () => redis.zadd(keys[1]!, 1, 'job')], [keys[2]!, () => redis.zadd(keys[2]!, 1, 'job')]] as const) {
      await fill();
      expect(await look(), `with a job in ${key}`).toBe(1);
      expect(await redis.zscore(keys[3]!, '0'), `with a job in ${key}`).toBe('0');
      await redis.del(key);
    }
    expect(await look()).toBe(0);
    expect(await redis.zscore(keys[3]!, '0')).toBeNull();
    await redis.del(...keys);
  });
});
