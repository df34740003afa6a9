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
  /** How long a new connection has to send its request before it may be closed to bring the unauthenticated connections under their cap. */
  readonly unauthenticatedGraceMs: number;
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
 * without showing a token is the likeliest attacker.
 *
 * A real client sends its request as soon as it is connected, but "soon" is
 * not "before the next accept": in a cold burst the server accepts hundreds of
 * connections before it reads a byte of any, and a loaded client writes its
 * requests after its connects. So for the unauthenticated cap only connections
 * older than `unauthenticatedGraceMs` are closed; while every candidate is
 * younger, the new connection is let in above that cap, and the cap is
 * enforced again when the oldest candidate's grace ends (a slowloris's
 * connections are held for far longer: they are closed then). The overall cap
 * guards the process's descriptors and waits for nobody: over it, the oldest
 * candidate of any age is closed, and only when none can be is the new
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
  /** When each connection was accepted (performance.now()). */
  readonly #acceptedAt = new WeakMap<Socket, number>();
  /** Set while unauthenticated connections above their cap wait for the oldest one's grace to end. */
  #enforcement: NodeJS.Timeout | undefined;

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
    this.#acceptedAt.set(socket, performance.now());
    socket.once('close', () => {
      this.#open.delete(socket);
      this.#unauthenticated.delete(socket);
    });
    while (this.#open.size > this.#caps.maxConnections) {
      if (!this.#evictOne(Number.POSITIVE_INFINITY)) {
        this.#open.delete(socket);
        this.#close(socket, true);
        return;
      }
    }
    // One place is kept for the new connection: it stays within the cap when the older ones can make room.
    this.#enforceUnauthenticatedCap(this.#caps.maxUnauthenticatedConnections - 1);
    this.#unauthenticated.add(socket);
  }

  /**
   * Closes the oldest unauthenticated connections past their grace until at
   * most `cap` remain; while younger ones keep it over, looks again when the
   * oldest of those has had its grace.
   */
  #enforceUnauthenticatedCap(cap: number): void {
    const graced = performance.now() - this.#caps.unauthenticatedGraceMs;
    while (this.#unauthenticated.size > cap && this.#evictOne(graced));
    if (this.#unauthenticated.size <= cap || this.#enforcement !== undefined) return;
    const oldest = this.#oldestCandidate();
    // Every one left is answering a request: the next request that ends without a token is seen at the next accept.
    if (oldest === undefined) return;
    const wait = Math.max(0, (this.#acceptedAt.get(oldest) ?? 0) - graced);
    this.#enforcement = setTimeout(() => {
      this.#enforcement = undefined;
      this.#enforceUnauthenticatedCap(this.#caps.maxUnauthenticatedConnections);
    }, Math.ceil(wait));
    // Never what keeps a process alive.
    this.#enforcement.unref();
  }

  /** The oldest unauthenticated connection not answering a request: the one to close first. */
  #oldestCandidate(): Socket | undefined {
    for (const socket of this.#unauthenticated) if ((this.#busy.get(socket) ?? 0) === 0) return socket;
    return undefined;
  }

  /** Closes the oldest candidate accepted no later than `acceptedBy`; false when there is none. */
  #evictOne(acceptedBy: number): boolean {
    const socket = this.#oldestCandidate();
    if (socket === undefined || (this.#acceptedAt.get(socket) ?? 0) > acceptedBy) return false;
    this.#unauthenticated.delete(socket);
    // Its 'close' comes later: it stops counting now, so the loops that evict end.
    this.#open.delete(socket);
    this.#close(socket, !this.#used.has(socket));
    return true;
  }

  #close(socket: Socket, answer: boolean): void {
    this.#closed.add(socket);
    if (answer) {
      answerOnSocket(socket, new UnavailableError('too many connections are open', { what: 'this dispatcher takes no more connections right now' }), { 'retry-after': String(RETRY_AFTER_SECONDS) });
    } else socket.destroy();
  }
}
