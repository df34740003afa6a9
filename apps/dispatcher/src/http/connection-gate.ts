import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import { UnavailableError } from '@forge-fleet/shared';
import { answerOnSocket } from './raw-answer.js';

/** Seconds a client over capacity is asked to wait (`Retry-After`). */
export const RETRY_AFTER_SECONDS = 1;

/** The caps a {@link ConnectionGate} keeps. */
export interface ConnectionCaps {
  readonly maxConnections: number;
  readonly maxUnauthenticatedConnections: number;
}

/**
 * Caps the connections a dispatcher holds, so that no flood of them — slow
 * headers, idle keep-alives, anything without a token — can use up its file
 * descriptors (and with them `/healthz` and every authenticated caller).
 *
 * A connection is *unauthenticated* from its accept until one of its requests
 * shows a valid token ({@link authenticated}). When a new connection would go
 * over either cap, the oldest unauthenticated connection not in the middle of
 * a request is closed to make room — answered `503` + `Retry-After` if it has
 * not sent a request yet — since a client that has held a connection longest
 * without showing a token is the likeliest attacker, and a real client sends its
 * request as soon as it is connected. Only when none can be closed is the new
 * connection refused (`503` + `Retry-After`, then closed).
 */
export class ConnectionGate {
  readonly #caps: ConnectionCaps;
  /** Connections counted against the caps (one being closed by the gate no longer is). */
  readonly #open = new Set<Socket>();
  /** In accept order: the first is the oldest. */
  readonly #unauthenticated = new Set<Socket>();
  /** Requests being answered on a connection (fastify holds them): not to be cut. */
  readonly #busy = new WeakMap<Socket, number>();
  /** Connections that carried a request already: closing one of those answers nothing. */
  readonly #used = new WeakSet<Socket>();
  /** Connections refused or evicted: a request Node still parses on one is not served. */
  readonly #closed = new WeakSet<Socket>();

  constructor(caps: ConnectionCaps) {
    this.#caps = caps;
  }

  /** Watches the server's connections; runs before Node's HTTP parser sees one. */
  attach(server: Server): void {
    server.prependListener('connection', (socket: Socket) => this.#admit(socket));
  }

  /** The number of connections open, and of those without a token yet (for logs and tests). */
  get counts(): { open: number; unauthenticated: number } {
    return { open: this.#open.size, unauthenticated: this.#unauthenticated.size };
  }

  /**
   * A request arrived on `socket`. Returns false when the gate closed that
   * connection already (the request is then not served), else marks it busy
   * until `done` fires.
   */
  request(socket: Socket, done: (listener: () => void) => void): boolean {
    if (this.#closed.has(socket)) return false;
    this.#used.add(socket);
    this.#busy.set(socket, (this.#busy.get(socket) ?? 0) + 1);
    done(() => this.#busy.set(socket, (this.#busy.get(socket) ?? 1) - 1));
    return true;
  }

  /** A request on `socket` showed a valid token: the connection is no longer counted as unauthenticated. */
  authenticated(socket: Socket): void {
    this.#unauthenticated.delete(socket);
  }

  #admit(socket: Socket): void {
    this.#open.add(socket);
    socket.once('close', () => {
      this.#open.delete(socket);
      this.#unauthenticated.delete(socket);
    });
    const over = (): boolean => this.#open.size > this.#caps.maxConnections || this.#unauthenticated.size >= this.#caps.maxUnauthenticatedConnections;
    while (over()) {
      if (!this.#evictOne()) {
        this.#open.delete(socket);
        this.#close(socket, true);
        return;
      }
    }
    this.#unauthenticated.add(socket);
  }

  /** Closes the oldest unauthenticated connection not answering a request; false when there is none. */
  #evictOne(): boolean {
    for (const socket of this.#unauthenticated) {
      if ((this.#busy.get(socket) ?? 0) > 0) continue;
      this.#unauthenticated.delete(socket);
      // Its 'close' comes later: it stops counting now, so the loop in #admit ends.
      this.#open.delete(socket);
      this.#close(socket, !this.#used.has(socket));
      return true;
    }
    return false;
  }

  #close(socket: Socket, answer: boolean): void {
    this.#closed.add(socket);
    if (answer) {
      answerOnSocket(socket, new UnavailableError('too many connections are open', { what: 'this dispatcher takes no more connections right now' }), { 'retry-after': String(RETRY_AFTER_SECONDS) });
    } else socket.destroy();
  }
}
