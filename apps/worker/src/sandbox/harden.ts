/**
 * Runs inside a sandbox process before the tools module is evaluated.
 *
 * A network namespace stops IP traffic, but Unix-domain sockets are files:
 * one bound on the host (a Redis or Docker socket, say) is reachable from the
 * namespace by its path, and Node's permission model on Node 20 does not
 * cover sockets. Every Unix-socket client in Node (net, http `socketPath`,
 * tls, fetch through undici) goes through `Socket.prototype.connect`, and
 * `process.binding` is closed by the permission model, so refusing paths
 * here closes that door for JavaScript. It is a JavaScript-level guard, not a
 * kernel one: see docs/sandbox.md.
 */
import { Socket } from 'node:net';

function isPathTarget(args: unknown[]): boolean {
  const [first] = args;
  const target = Array.isArray(first) ? (first as unknown[])[0] : first;
  if (typeof target === 'string') return !/^\d+$/.test(target);
  return typeof target === 'object' && target !== null && 'path' in target && (target as { path?: unknown }).path !== undefined;
}

// Read through the descriptor: the original is applied with its socket as `this`, below.
const connect = Object.getOwnPropertyDescriptor(Socket.prototype, 'connect')?.value as (this: Socket, ...args: unknown[]) => Socket;
Object.defineProperty(Socket.prototype, 'connect', {
  configurable: false,
  writable: false,
  value: function guardedConnect(this: Socket, ...args: unknown[]): Socket {
    if (isPathTarget(args)) {
      throw Object.assign(new Error('Unix-domain sockets are not available in the tool sandbox'), { code: 'ERR_ACCESS_DENIED' });
    }
    return connect.apply(this, args);
  },
});
