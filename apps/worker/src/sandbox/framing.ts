import { StringDecoder } from 'node:string_decoder';

/**
 * The sandbox channel's framing, one JSON message per line, used on both ends
 * (this file is bundled into the sandbox too). Both ends send many messages
 * per turn under load, so sending appends to one string that leaves in a
 * single write at the end of the event-loop iteration (a Writable's cork/uncork would still
 * queue, convert and hand over each message separately), and receiving
 * splits chunks by hand rather than through readline's per-line machinery.
 */
export class Outbox {
  #pending = '';

  constructor(private readonly write: (text: string) => void) {}

  /** Queues one message (without its newline) for this turn's write. */
  send(line: string): void {
    // At the end of this loop iteration, not of this callback: replies from Redis and from other sandbox
    // processes that arrived in the same poll phase send their calls in the same write.
    if (this.#pending === '') setImmediate(() => this.flush());
    this.#pending += `${line}\n`;
  }

  /** Writes what is queued now (also called at the end of the turn). */
  flush(): void {
    if (this.#pending === '') return;
    const text = this.#pending;
    this.#pending = '';
    this.write(text);
  }
}

/**
 * Returns a chunk handler that calls `onLine` for every complete line, in
 * order, and keeps the unfinished tail (multi-byte characters split across
 * chunks included) for the next chunk.
 */
export function lineReader(onLine: (line: string) => void): (chunk: Buffer) => void {
  const decoder = new StringDecoder('utf8');
  let tail = '';
  return (chunk) => {
    const text = tail + decoder.write(chunk);
    let start = 0;
    for (let end = text.indexOf('\n'); end !== -1; end = text.indexOf('\n', start)) {
      const line = text.slice(start, end);
      start = end + 1;
      if (line !== '') onLine(line);
    }
    tail = start === 0 ? text : text.slice(start);
  };
}
