/** The raw BullMQ arm's worker: what people write by hand today. */
import { Worker } from 'bullmq';
import { Redis } from 'ioredis';

const [url = '', queue = 'bench', concurrency = '256'] = process.argv.slice(2);
const worker = new Worker(queue, () => Promise.resolve({ ok: true }), {
  connection: new Redis(url, { maxRetriesPerRequest: null }),
  prefix: 'raw',
  concurrency: Number(concurrency),
});
await worker.waitUntilReady();
process.stdout.write('worker ready\n');
process.once('SIGTERM', () => void worker.close().then(() => process.exit(0)));
