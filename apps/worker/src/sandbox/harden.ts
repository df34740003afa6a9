/**
 * Runs inside a sandbox process before the tools module is evaluated: the
 * JavaScript layers under the kernel's (see docs/sandbox.md, "Signals" and
 * "Unix-domain sockets").
 *
 * **Unix sockets.** A network namespace stops IP traffic, but Unix-domain
 * sockets are files: one bound on the host (a Redis or Docker socket, say)
 * is reachable from the namespace by its path unless the sandbox's
 * filesystem view hides it (bubblewrap does; the `unshare` fallback does
 * not), and Node's permission model on Node 20 does not cover sockets. Every
 * Unix-socket client in Node (net, http `socketPath`, tls, fetch through
 * undici) goes through `Socket.prototype.connect`, and `process.binding` is
 * closed by the permission model. The guard copies what it is given into
 * plain data first — each own property read once, into an object without a
 * prototype — checks the copy and hands Node the copy, so a Proxy, a getter
 * or a polluted `Object.prototype` cannot answer the check one way and
 * Node's own read another.
 *
 * **Signals.** A handler may signal only its own process. With a PID
 * namespace and a session of its own a sandbox cannot reach the worker
 * anyway; this covers machines where the namespace layer is missing.
 */
import { Socket } from 'node:net';

// The worker starts the sandbox with no environment; bubblewrap still sets PWD. A handler sees none of it.
for (const name of Object.keys(process.env)) delete process.env[name];

/** An error of the kind Node's permission model throws, so handlers see one shape for "not in the sandbox". */
function denied(what: string): Error {
  return Object.assign(new Error(`${what} not available in the tool sandbox`), { code: 'ERR_ACCESS_DENIED' });
}

/** Locks `key` of `target` to `value`: no handler can put the original back or wrap it again. */
function lock(target: object, key: string, value: unknown): void {
  Object.defineProperty(target, key, { configurable: false, writable: false, enumerable: true, value });
}

/** `value`'s own properties, each read exactly once, in an object with no prototype to inherit anything from. */
function snapshot(value: object): Record<PropertyKey, unknown> {
  const copy = Object.create(null) as Record<PropertyKey, unknown>;
  for (const key of Reflect.ownKeys(value)) copy[key] = (value as Record<PropertyKey, unknown>)[key];
  return copy;
}

/** What Node's `isPipeName` takes for a path: a string that is not a number. */
function isPipeName(value: unknown): value is string {
  return typeof value === 'string' && Number.isNaN(Number(value));
}

type Callback = (...args: unknown[]) => void;

/**
 * The connect call's arguments as plain data, in the one form the original
 * then normalises itself: `(options, callback?)`. `net.connect` passes its
 * normalised `[options, callback]` pair as the only argument; a handler may
 * pass `(options | path | port, host?, callback?)`.
 *
 * @throws an `ERR_ACCESS_DENIED` error when they name a Unix-socket path.
 */
function plainArguments(args: readonly unknown[]): [Record<PropertyKey, unknown>, Callback | undefined] {
  const list: readonly unknown[] = Array.isArray(args[0]) ? [(args[0] as unknown[])[0], (args[0] as unknown[])[1]] : args;
  const [first, second] = list;
  const last = list.length > 1 ? list[list.length - 1] : undefined;
  const callback = typeof last === 'function' ? (last as Callback) : undefined;
  let options: Record<PropertyKey, unknown>;
  if (typeof first === 'object' && first !== null) {
    options = snapshot(first);
  } else if (isPipeName(first)) {
    throw denied('Unix-domain sockets are');
  } else {
    options = Object.create(null) as Record<PropertyKey, unknown>;
    if (first !== undefined) options.port = first;
    if (typeof second === 'string') options.host = second;
  }
  // Node connects to a path when `options.path` is truthy; the copy cannot change before Node reads it.
  if (options.path) throw denied('Unix-domain sockets are');
  return [options, callback];
}

// Read through the descriptor: the original is applied with its socket as `this`, below.
const connect = Object.getOwnPropertyDescriptor(Socket.prototype, 'connect')?.value as (this: Socket, ...args: unknown[]) => Socket;
lock(Socket.prototype, 'connect', function guardedConnect(this: Socket, ...args: unknown[]): Socket {
  const [options, callback] = plainArguments(args);
  return callback === undefined ? connect.call(this, options) : connect.call(this, options, callback);
});

// Read now, before any handler could redefine `process.pid` (it is configurable).
const ownPid = process.pid;
const kill = process.kill.bind(process);
const rawKill = (process as unknown as { _kill: (pid: number, signal: number) => number })._kill.bind(process);
/** Refuses any pid but this process's own; a pid that is not a plain number is never coerced (it could answer twice). */
function ownOnly(pid: unknown): number {
  if (typeof pid !== 'number' || pid !== ownPid) throw denied('signalling other processes is');
  return pid;
}
lock(process, 'kill', function guardedKill(pid: unknown, signal?: string | number): true {
  return kill(ownOnly(pid), signal);
});
// process.kill calls it; on its own it is a second way in.
lock(process, '_kill', function guardedRawKill(pid: unknown, signal: number): number {
  return rawKill(ownOnly(pid), signal);
});
