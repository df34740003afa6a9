import { spawn } from 'node:child_process';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isFleetError, type ToolResult } from '@forge-fleet/shared';
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

/** Calls `handle` with each non-empty line of a request's NDJSON body, as it arrives. */
function eachLine(req: IncomingMessage, handle: (line: string) => void): void {
  let buffered = '';
  req.on('data', (d: Buffer) => {
    buffered += d.toString();
    const lines = buffered.split('\n');
    buffered = lines.pop()!;
    for (const line of lines.filter(Boolean)) handle(line);
  });
}

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
    eachLine(req, (line) => {
      const { id, name } = JSON.parse(line) as { id: string; name: string };
      res.write(`${JSON.stringify({ id, status: 'completed', result: { toolCallId: id, name, content: 'done', isError: false } })}\n`);
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

/** How each stand-in call ends, by tool name; `waits.<name>` first waits for a person, then ends the same way. */
const ENDINGS: Record<string, { status: 'failed' | 'cancelled'; error: { code: string; message: string; retryable: boolean; details: Record<string, unknown> } }> = {
  denied: { status: 'failed', error: { code: 'APPROVAL_DENIED', message: "call to tool 'denied' was denied: not during the freeze (decided by alice)", retryable: false, details: { toolName: 'denied', reason: 'not during the freeze (decided by alice)' } } },
  expired: { status: 'failed', error: { code: 'EXPIRED', message: "call to tool 'expired' expired waiting for a person to approve it, and was not executed", retryable: false, details: { toolName: 'expired' } } },
  cancelled: { status: 'cancelled', error: { code: 'CANCELLED', message: "call to tool 'cancelled' was cancelled: cancelled by its caller", retryable: false, details: { toolName: 'cancelled', reason: 'cancelled by its caller' } } },
  no_worker: { status: 'failed', error: { code: 'NO_WORKER', message: "no live worker serves tool 'no_worker'", retryable: true, details: { toolName: 'no_worker' } } },
  forged: { status: 'failed', error: { code: 'FORGED_CALL', message: 'the job carried no dispatcher signature', retryable: false, details: {} } },
  // The tool ran (or may have): its own failures are results.
  failed: { status: 'failed', error: { code: 'EXECUTION_FAILED', message: "tool 'failed' failed: boom", retryable: true, details: { toolName: 'failed' } } },
  lost: { status: 'failed', error: { code: 'WORKER_LOST', message: "the worker running tool 'lost' was lost", retryable: true, details: { reason: 'lock_expired' } } },
  no_worker_after_runs: { status: 'failed', error: { code: 'NO_WORKER', message: "tool 'no_worker_after_runs' ran 1 time; check before calling it again", retryable: true, details: { runs: 1 } } },
  timed_out: { status: 'failed', error: { code: 'EXECUTION_TIMEOUT', message: "tool 'timed_out' timed out after 300 ms", retryable: true, details: { timeoutMs: 300 } } },
};
const NEVER_RAN = ['denied', 'expired', 'cancelled', 'no_worker', 'forged'];
const RAN = ['failed', 'lost', 'no_worker_after_runs', 'timed_out'];

/**
 * A stand-in dispatcher serving every way FleetClient submits (stream, batch, single) and waits (GET with `wait`).
 * A call to `<ending>` ends at once as ENDINGS says; one to `waits.<ending>` waits for a person first, and its
 * wait reads the ending.
 */
async function endingDispatcher(): Promise<Server> {
  const names = new Map<string, string>();
  const ended = (id: string, name: string) => {
    const ending = ENDINGS[name.replace(/^waits\./, '')]!;
    return { id, status: ending.status, result: { toolCallId: id, name, content: ending.error.message, isError: true, error: ending.error } };
  };
  const viewOf = (call: { id: string; name: string }) => {
    names.set(call.id, call.name);
    return call.name.startsWith('waits.') ? { id: call.id, status: 'awaiting_approval', reason: 'a person must confirm' } : ended(call.id, call.name);
  };
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://stand-in');
    if (req.method === 'GET') {
      const id = decodeURIComponent(url.pathname.slice('/v1/calls/'.length));
      return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(ended(id, names.get(id)!)));
    }
    if (url.pathname === '/v1/calls/stream') {
      res.writeHead(200, { 'content-type': 'application/x-ndjson' });
      res.write('\n');
      eachLine(req, (line) => res.write(`${JSON.stringify(viewOf(JSON.parse(line) as { id: string; name: string }))}\n`));
      req.on('end', () => res.end());
      return;
    }
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString()));
    req.on('end', () => {
      if (url.pathname === '/v1/calls/batch') {
        const { calls } = JSON.parse(body) as { calls: { id: string; name: string }[] };
        res.writeHead(200, { 'content-type': 'application/x-ndjson' });
        return void res.end(calls.map((call, index) => `${JSON.stringify({ index, ...viewOf(call) })}\n`).join(''));
      }
      const view = viewOf(JSON.parse(body) as { id: string; name: string });
      res.writeHead(view.status === 'awaiting_approval' ? 202 : 200, { 'content-type': 'application/json' }).end(JSON.stringify(view));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return server;
}

/** How a call came out: the FleetError it threw (code, message, details), or the result it resolved to. */
async function outcomeOf(promise: Promise<ToolResult>): Promise<{ thrown: { code: string; message: string; details: Record<string, unknown> } } | { result: ToolResult }> {
  try {
    return { result: await promise };
  } catch (error) {
    if (!isFleetError(error)) throw error;
    return { thrown: { code: error.code, message: error.message, details: { ...error.details } } };
  }
}

describe('FleetClient: a call whose tool never ran throws; a tool that ran and failed is a result', () => {
  let server: Server | undefined;
  afterEach(() => new Promise<void>((resolve) => (server === undefined ? resolve() : server.close(() => resolve()))));

  const MODES = { stream: {}, batch: { stream: false }, 'one request per call': { batch: false } } as const;

  it.each(Object.keys(MODES) as (keyof typeof MODES)[])('the same for every ending, at once or after waiting for a person, with call and wait (%s)', async (mode) => {
    server = await endingDispatcher();
    const client = new FleetClient({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, retryWindowMs: 0, ...MODES[mode] });
    try {
      for (const name of [...NEVER_RAN, ...RAN].flatMap((n) => [n, `waits.${n}`])) {
        const ending = name.replace(/^waits\./, '');
        const { error } = ENDINGS[ending]!;
        const viaCall = await outcomeOf(client.call(name, {}));
        const view = await client.submit(name, {});
        const viaWait = await outcomeOf(client.wait(view.id));
        for (const outcome of [viaCall, viaWait]) {
          if (NEVER_RAN.includes(ending)) {
            expect({ name, outcome }).toEqual({ name, outcome: { thrown: { code: error.code, message: error.message, details: error.details } } });
          } else {
            expect({ name, outcome }).toMatchObject({ name, outcome: { result: { isError: true, error } } });
          }
        }
      }
    } finally {
      await client.close();
    }
  });
});
