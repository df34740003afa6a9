import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { FleetClient } from './client.js';

/** A stand-in dispatcher answering `POST /v1/calls/batch` with the given byte chunks, a pause between each. */
async function batchAnswering(chunks: (index: number[]) => Buffer[]): Promise<Server> {
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString()));
    req.on('end', () => {
      const calls = (JSON.parse(body) as { calls: unknown[] }).calls;
      res.writeHead(200, { 'content-type': 'application/x-ndjson' });
      const parts = chunks(calls.map((_, i) => i));
      const next = (i: number): void => {
        if (i === parts.length) return void res.end();
        res.write(parts[i]);
        setTimeout(() => next(i + 1), 20);
      };
      next(0);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return server;
}

const view = (index: number, text: string) => ({ index, id: `c${index}`, status: 'completed', result: { toolCallId: `c${index}`, name: 'echo', content: text, isError: false } });

describe('FleetClient batch answers', () => {
  let server: Server | undefined;
  afterEach(() => new Promise<void>((resolve) => (server === undefined ? resolve() : server.close(() => resolve()))));

  it('keeps a character whole when the answer splits it between two chunks', async () => {
    server = await batchAnswering((indexes) => {
      const bytes = Buffer.from(indexes.map((i) => `${JSON.stringify(view(i, 'prix: 12 €, café'))}\n`).join(''), 'utf8');
      // Cut inside the first "€" (three bytes in UTF-8).
      const cut = bytes.indexOf(Buffer.from('€', 'utf8')) + 1;
      return [bytes.subarray(0, cut), bytes.subarray(cut)];
    });
    const client = new FleetClient({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, stream: false, retryWindowMs: 0 });
    try {
      const views = await Promise.all([client.submit('echo', {}, { id: 'c0' }), client.submit('echo', {}, { id: 'c1' })]);
      expect(views.map((v) => v.result?.content)).toEqual(['prix: 12 €, café', 'prix: 12 €, café']);
    } finally {
      await client.close();
    }
  });
});
