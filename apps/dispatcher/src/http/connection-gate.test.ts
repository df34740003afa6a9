import { createServer, type Server } from 'node:http';
import { connect, type Socket } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ConnectionGate } from './connection-gate.js';

/** A raw client connection: what it received, and whether the server closed it. */
async function open(port: number): Promise<{ socket: Socket; text: () => string; closed: Promise<void> }> {
  const socket = connect({ port, host: '127.0.0.1' });
  let text = '';
  socket.setEncoding('latin1').on('data', (c: string) => (text += c));
  socket.on('error', () => undefined);
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  await new Promise((resolve) => socket.once('connect', resolve));
  return { socket, text: () => text, closed };
}

describe('ConnectionGate', () => {
  let server: Server | undefined;
  const sockets: Socket[] = [];
  afterEach(async () => {
    for (const s of sockets) s.destroy();
    await new Promise((resolve) => server?.close(resolve));
  });

  /** A server whose gate marks a connection authenticated when a request sends `x-token`. */
  async function serve(caps: { maxConnections: number; maxUnauthenticatedConnections: number; unauthenticatedGraceMs: number }): Promise<{ port: number; gate: ConnectionGate }> {
    const gate = new ConnectionGate(caps);
    server = createServer((req, res) => {
      if (!gate.request(req.socket, (l) => res.once('close', l))) return;
      if (req.headers['x-token'] !== undefined) gate.authenticated(req.socket);
      res.end('ok');
    });
    gate.attach(server);
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
    return { port: (server.address() as { port: number }).port, gate };
  }

  it('closes the oldest unauthenticated connection for a new one once it had its grace, answering 503 + Retry-After if it sent nothing', async () => {
    const { port } = await serve({ maxConnections: 10, maxUnauthenticatedConnections: 2, unauthenticatedGraceMs: 0 });
    const [a, b] = [await open(port), await open(port)];
    sockets.push(a.socket, b.socket);
    const c = await open(port);
    sockets.push(c.socket);
    await a.closed;
    expect(a.text()).toMatch(/^HTTP\/1.1 503 [^]*retry-after: 1\r\n[^]*"code":"UNAVAILABLE"/);
    expect(b.socket.destroyed || c.socket.destroyed).toBe(false);
  });

  it('keeps authenticated connections and refuses a new one when all open ones are authenticated', async () => {
    const { port, gate } = await serve({ maxConnections: 2, maxUnauthenticatedConnections: 2, unauthenticatedGraceMs: 60_000 });
    const held = [await open(port), await open(port)];
    sockets.push(...held.map((h) => h.socket));
    for (const h of held) h.socket.write('GET / HTTP/1.1\r\nHost: x\r\nx-token: 1\r\n\r\n');
    await Promise.all(held.map((h) => new Promise<void>((resolve) => h.socket.once('data', () => resolve()))));
    expect(gate.counts).toEqual({ open: 2, unauthenticated: 0 });
    const refused = await open(port);
    sockets.push(refused.socket);
    await refused.closed;
    expect(refused.text()).toMatch(/^HTTP\/1.1 503 /);
    expect(held.every((h) => !h.socket.destroyed)).toBe(true);
  });

  it('closes no connection younger than its grace for the unauthenticated cap: a cold burst of real clients is served', async () => {
    const { port, gate } = await serve({ maxConnections: 10, maxUnauthenticatedConnections: 2, unauthenticatedGraceMs: 60_000 });
    // Connected at once, their requests not sent yet (a loaded client writes them a moment later).
    const burst = [await open(port), await open(port), await open(port), await open(port)];
    sockets.push(...burst.map((b) => b.socket));
    await vi.waitFor(() => expect(gate.counts).toEqual({ open: 4, unauthenticated: 4 }));
    for (const b of burst) b.socket.write('GET / HTTP/1.1\r\nHost: x\r\nx-token: 1\r\n\r\n');
    await Promise.all(burst.map((b) => new Promise<void>((resolve) => b.socket.once('data', () => resolve()))));
    expect(burst.map((b) => b.text().split('\r\n', 1)[0])).toEqual(Array(4).fill('HTTP/1.1 200 OK'));
    expect(gate.counts).toEqual({ open: 4, unauthenticated: 0 });
  });

  it('brings the unauthenticated connections back under their cap once the oldest have had their grace, and never past the overall cap', async () => {
    const { port, gate } = await serve({ maxConnections: 3, maxUnauthenticatedConnections: 2, unauthenticatedGraceMs: 50 });
    const [a, b, c] = [await open(port), await open(port), await open(port)];
    sockets.push(a.socket, b.socket, c.socket);
    // The oldest, never having sent a request, is answered 503 when its grace is over; the two others stay.
    await a.closed;
    expect(a.text()).toMatch(/^HTTP\/1.1 503 [^]*retry-after: 1\r\n/);
    await vi.waitFor(() => expect(gate.counts).toEqual({ open: 2, unauthenticated: 2 }));
    expect(b.socket.destroyed || c.socket.destroyed).toBe(false);
  });
});
