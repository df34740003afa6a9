import { createServer, type Server } from 'node:http';
import { connect, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
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
  async function serve(caps: { maxConnections: number; maxUnauthenticatedConnections: number }): Promise<{ port: number; gate: ConnectionGate }> {
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

  it('closes the oldest unauthenticated connection for a new one, answering 503 + Retry-After if it sent nothing', async () => {
    const { port } = await serve({ maxConnections: 10, maxUnauthenticatedConnections: 2 });
    const [a, b] = [await open(port), await open(port)];
    sockets.push(a.socket, b.socket);
    const c = await open(port);
    sockets.push(c.socket);
    await a.closed;
    expect(a.text()).toMatch(/^HTTP\/1.1 503 [^]*retry-after: 1\r\n[^]*"code":"UNAVAILABLE"/);
    expect(b.socket.destroyed || c.socket.destroyed).toBe(false);
  });

  it('keeps authenticated connections and refuses a new one when all open ones are authenticated', async () => {
    const { port, gate } = await serve({ maxConnections: 2, maxUnauthenticatedConnections: 2 });
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
});
