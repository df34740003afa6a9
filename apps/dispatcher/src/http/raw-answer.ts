import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FleetError } from '@forge-fleet/shared';
import { errorBody } from './errors.js';

/**
 * Answers `error` straight on a connection no request object holds (Node's
 * `clientError`, a connection over capacity, a body that never arrives), with
 * the documented error body, then closes the connection: what is left of its
 * input is not read.
 */
export function answerOnSocket(socket: Duplex, error: FleetError, headers: Readonly<Record<string, string>> = {}): void {
  if (socket.destroyed) return;
  if (socket.writable) {
    const body = JSON.stringify(errorBody(error));
    const lines = [
      `HTTP/1.1 ${error.httpStatus} ${STATUS_CODES[error.httpStatus] ?? 'Error'}`,
      'content-type: application/json; charset=utf-8',
      `content-length: ${Buffer.byteLength(body)}`,
      'connection: close',
      ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`),
    ];
    socket.end(`${lines.join('\r\n')}\r\n\r\n${body}`);
  }
  // Closed once the answer is out (or at once when it cannot be written); bounded either way.
  const destroy = (): void => void socket.destroy();
  if (socket.writableFinished || !socket.writable) destroy();
  else {
    socket.once('finish', destroy);
    setTimeout(destroy, 1000).unref();
  }
}
