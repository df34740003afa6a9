import { setMaxListeners } from 'node:events';
import type { Socket } from 'node:net';

/** What a wait cut short by its client's hang-up is told. */
const HUNG_UP = 'the client closed the connection';

/** One signal per connection (see {@link hangUpOf}). */
const signals = new WeakMap<Socket, AbortSignal>();

/**
 * A signal that aborts when the client closes `socket`: what a request's wait
 * listens to, so that a long wait does not outlive its client. One per
 * connection, not per request — a keep-alive connection carries thousands of
 * requests, and an `AbortController` costs microseconds to make (and more to
 * collect) where a lookup here costs nanoseconds. A request's listeners are
 * removed when its wait ends, so the signal fires only for the requests still
 * waiting on the connection when it closes — which a response's own 'close'
 * without a finished write also meant, since a response cannot end early
 * without its connection.
 */
export function hangUpOf(socket: Socket | null): AbortSignal {
  // A response whose connection is gone already has no socket.
  if (socket === null) return AbortSignal.abort(new Error(HUNG_UP));
  let signal = signals.get(socket);
  if (signal !== undefined) return signal;
  if (socket.destroyed) signal = AbortSignal.abort(new Error(HUNG_UP));
  else {
    const controller = new AbortController();
    socket.once('close', () => controller.abort(new Error(HUNG_UP)));
    signal = controller.signal;
    // Every request waiting on the connection may listen (several at once when pipelined, and a batch's calls
    // each); each removes its listener when its wait ends, so the count is bounded by what waits, not a leak.
    setMaxListeners(0, signal);
  }
  signals.set(socket, signal);
  return signal;
}
