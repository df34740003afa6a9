import { spawn } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { FleetClient } from './client.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

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

/**
 * A stand-in dispatcher whose call streams answer each call at once and then
 * stay open for ever (a real one ends a stream once the client ends its body):
 * a client that needs the stream to end before its process can exit never exits.
 */
async function streamNeverEnding(): Promise<{ server: Server; streams: () => number; firstStreamClosed: Promise<void> }> {
  let streams = 0;
  let closed!: () => void;
  const firstStreamClosed = new Promise<void>((resolve) => (closed = resolve));
  const server = createServer((req, res) => {
    if (req.url?.startsWith('/v1/calls/stream') !== true) return void res.writeHead(404).end();
    streams++;
    // The client hung up (it closed the stream, or its process ended).
    res.once('close', () => closed());
    res.writeHead(200, { 'content-type': 'application/x-ndjson' });
    res.write('\n');
    let buffered = '';
    req.on('data', (d: Buffer) => {
      buffered += d.toString();
      const lines = buffered.split('\n');
      buffered = lines.pop()!;
      for (const line of lines.filter(Boolean)) {
        const { id, name } = JSON.parse(line) as { id: string; name: string };
        res.write(`${JSON.stringify({ id, status: 'completed', result: { toolCallId: id, name, content: 'done', isError: false } })}\n`);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, streams: () => streams, firstStreamClosed };
}

describe('FleetClient and the process it runs in', () => {
  it('lets a script exit once its last call is answered, with its call stream still open and idle, without close()', async () => {
    const { server, streams } = await streamNeverEnding();
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const script = `
      const { FleetClient } = await import('@forge-fleet/client');
      const fleet = new FleetClient({ url: process.argv[1], retryWindowMs: 0 });
      const first = await fleet.call('echo', {});
      const second = await fleet.call('echo', {});
      process.stdout.write(first.content + ' ' + second.content);
    `;
    const child = spawn(process.execPath, ['--conditions=forge-source', '--import', 'tsx', '--input-type=module', '-e', script, url], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    try {
      // Bounded: a process held by its idle stream would never exit here (the stand-in never ends a stream).
      const code = await Promise.race([exited, new Promise<'still running'>((resolve) => setTimeout(() => resolve('still running'), 20_000).unref())]);
      expect(code, out).toBe(0);
      expect(out).toBe('done done');
      // Both calls went on the one stream, which was open (and idle) when the process ended.
      expect(streams()).toBe(1);
    } finally {
      child.kill('SIGKILL');
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  }, 30_000);

  it('closes its call streams and connections with close()', async () => {
    const { server, streams, firstStreamClosed } = await streamNeverEnding();
    const client = new FleetClient({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, retryWindowMs: 0 });
    try {
      expect((await client.call('echo', {})).content).toBe('done');
      await client.close();
      // The stand-in never ends the stream: only the client's close() ends it.
      await firstStreamClosed;
      expect(streams()).toBe(1);
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
