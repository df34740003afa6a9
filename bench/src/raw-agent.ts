/** The raw BullMQ arm's agent: Queue.add + job.waitUntilFinished(queueEvents). */
import { Queue, QueueEvents } from 'bullmq';
import { Redis } from 'ioredis';
import { runAgent } from './agent-loop.js';

const [url = '', queueName = 'bench', inflight = '1'] = process.argv.slice(2);
const queue = new Queue(queueName, { connection: new Redis(url, { maxRetriesPerRequest: null }), prefix: 'raw' });
const events = new QueueEvents(queueName, { connection: new Redis(url, { maxRetriesPerRequest: null }), prefix: 'raw' });
await events.waitUntilReady();
await runAgent(Number(inflight), async () => {
  const job = await queue.add('noop', {}, { removeOnComplete: 1000, removeOnFail: 1000 });
  return job.waitUntilFinished(events);
});
process.exit(0);
