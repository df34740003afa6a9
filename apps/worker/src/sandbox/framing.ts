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

export { lineReader } from '@forge-fleet/shared';
