import type { Socket } from 'node:net';
import { PassThrough } from 'node:stream';
import { type CallView, CallView as CallViewSchema, lineReader } from '@forge-fleet/shared';
import { buildConnector, Client, request } from 'undici';
import { errorFrom, errorOfAnswer } from './errors.js';

/** A call waiting for its answer: what was sent, and whom to tell. */
export interface StreamedCall {
  readonly body: Record<string, unknown> & { readonly id: string };
  readonly resolve: (view: CallView) => void;
  readonly reject: (error: unknown) => void;
}

/** Why calls left a stream unanswered; the client decides whether to send them again. */
export type StreamLoss =
  /** The request failed, or the answer ended early (a dispatcher went away): `error` says how. */
  | { readonly kind: 'lost'; readonly error: unknown }
  /** The dispatcher answered the call with an error (`UNAVAILABLE`: send it again elsewhere). */
  | { readonly kind: 'refused'; readonly error: unknown }
  /** No answer began in time, or the dispatcher does not know streams: this client goes back to batches. */
  | { readonly kind: 'unsupported'; readonly error: unknown };

export interface CallStreamOptions<C extends StreamedCall> {
  readonly url: string;
  readonly headers: Record<string, string>;
  /** Calls the stream gives back unanswered (see StreamLoss). */
  readonly onLoss: (calls: readonly C[], loss: StreamLoss) => void;
  /** Called once the stream has ended, answered or not: the client forgets it. */
  readonly onEnd: () => void;
}

/** New calls go on a stream for this long; then a new one takes over (and this one ends once answered). */
const STREAM_LIFETIME_MS = 30_000;
/** An unused stream ends after this long. */
const STREAM_IDLE_MS = 5_000;
/** How long the answer to a stream may take to begin before the client assumes something on the way buffers request bodies. */
const STREAM_START_TIMEOUT_MS = 10_000;

/**
 * One long `POST /v1/calls/stream` request: calls go out as NDJSON lines of
 * the request body (those of one event-loop iteration in one write), their
 * answers come back as lines of the response as each call ends. An agent
 * whose calls end a few at a time would otherwise send a request — and the
 * dispatcher handle one — for every one or two calls.
 *
 * A stream has a connection of its own, so that while it waits idle for the
 * next call (up to {@link STREAM_IDLE_MS}) neither its socket nor its timer
 * keeps the process alive: a script whose last call was answered exits at
 * once instead of when the idle stream ends. (undici unrefs idle keep-alive
 * sockets itself, but a stream is a request in flight, which it keeps ref'd,
 * and it does not say which of a pool's sockets carries a request.)
 */
export class CallStream<C extends StreamedCall = StreamedCall> {
  readonly #o: CallStreamOptions<C>;
  /** Calls sent and not answered yet, by id (a caller may send one id twice: each gets an answer), with their line numbers. */
  readonly #pending = new Map<string, { call: C; line: number }[]>();
  #count = 0;
  /** Lines sent: the dispatcher answers a line it cannot read (too long for it) by its number. */
  #lines = 0;
  readonly #body = new PassThrough();
  readonly #opened = Date.now();
  #outbox = '';
  #responded = false;
  #ending = false;
  #finished = false;
  #idle: NodeJS.Timeout | undefined;
  readonly #connection: Client;
  /** This stream's socket, once connected: ref'd while calls wait for answers, unref'd while idle. */
  #socket: Socket | undefined;

  constructor(options: CallStreamOptions<C>) {
    this.#o = options;
    const connect = buildConnector({});
    this.#connection = new Client(new URL(options.url).origin, {
      pipelining: 1,
      connect: (opts, callback) =>
        connect(opts, (...args) => {
          if (args[1] !== null) this.#socket = args[1];
          callback(...args);
        }),
    });
    void this.#run();
  }

  /** Whether new calls may go on this stream. */
  get accepting(): boolean {
    return !this.#ending && !this.#finished && Date.now() - this.#opened < STREAM_LIFETIME_MS;
  }

  send(call: C): void {
    clearTimeout(this.#idle);
    this.#socket?.ref();
    const sent = { call, line: ++this.#lines };
    const same = this.#pending.get(call.body.id);
    if (same === undefined) this.#pending.set(call.body.id, [sent]);
    else same.push(sent);
    this.#count++;
    if (this.#outbox === '') setImmediate(() => this.#flush());
    this.#outbox += `${JSON.stringify(call.body)}\n`;
  }

  /** Takes no new calls; the request body ends once every call sent is answered. */
  retire(): void {
    this.#ending = true;
    if (this.#count === 0) this.#endBody();
  }

  /** Ends at once; calls still unanswered are given back as lost. Resolves once its connection is closed. */
  async close(): Promise<void> {
    this.#ending = true;
    this.#body.destroy();
    await this.#connection.destroy().catch(() => undefined);
  }

  #flush(): void {
    const text = this.#outbox;
    this.#outbox = '';
    if (text !== '' && !this.#body.destroyed) this.#body.write(text);
  }

  #endBody(): void {
    clearTimeout(this.#idle);
    this.#flush();
    if (!this.#body.writableEnded) this.#body.end();
  }

  #answered(): void {
    if (this.#count > 0) return;
    if (this.#ending || !this.accepting) this.#endBody();
    else {
      // Idle: open for the next call, but not a reason for the process to stay (see the class comment).
      this.#idle = setTimeout(() => this.retire(), STREAM_IDLE_MS).unref();
      this.#socket?.unref();
    }
  }

  #giveBack(loss: StreamLoss): void {
    const left = [...this.#pending.values()].flat().map((sent) => sent.call);
    this.#pending.clear();
    this.#count = 0;
    if (left.length > 0) this.#o.onLoss(left, loss);
  }

  #take(line: string): void {
    let message: { id?: unknown; line?: unknown; error?: Record<string, unknown> };
    try {
      message = JSON.parse(line) as typeof message;
    } catch {
      return;
    }
    const call = typeof message.id === 'string' ? this.#answerFor(message.id) : typeof message.line === 'number' ? this.#answerForLine(message.line) : undefined;
    if (call === undefined) return;
    if (message.error !== undefined) this.#o.onLoss([call], { kind: 'refused', error: errorFrom(500, { error: message.error }) });
    else {
      const view = CallViewSchema.safeParse(message);
      if (view.success) call.resolve(view.data);
      else call.reject(errorFrom(500, undefined));
    }
    this.#answered();
  }

  /** The oldest unanswered call sent with this id, now answered. */
  #answerFor(id: string): C | undefined {
    const same = this.#pending.get(id);
    const sent = same?.shift();
    if (sent === undefined) return undefined;
    if (same!.length === 0) this.#pending.delete(id);
    this.#count--;
    return sent.call;
  }

  /** The call sent on line `line`, now answered (the dispatcher could not read its id). */
  #answerForLine(line: number): C | undefined {
    for (const [id, same] of this.#pending) {
      const i = same.findIndex((sent) => sent.line === line);
      if (i === -1) continue;
      const [sent] = same.splice(i, 1);
      if (same.length === 0) this.#pending.delete(id);
      this.#count--;
      return sent!.call;
    }
    return undefined;
  }

  async #run(): Promise<void> {
    const startTimer = setTimeout(() => {
      if (this.#responded) return;
      this.#ending = true;
      this.#giveBack({ kind: 'unsupported', error: new Error(`no answer to the call stream began within ${STREAM_START_TIMEOUT_MS} ms`) });
      this.#body.destroy();
    }, STREAM_START_TIMEOUT_MS);
    try {
      const response = await request(this.#o.url, {
        method: 'POST',
        dispatcher: this.#connection,
        headers: { ...this.#o.headers, 'content-type': 'application/x-ndjson' },
        body: this.#body,
      });
      this.#responded = true;
      clearTimeout(startTimer);
      if (response.statusCode >= 400) {
        const error = await errorOfAnswer(response.statusCode, response.body);
        this.#ending = true;
        this.#body.destroy();
        // A dispatcher from before streams answers 404 (no route) or 415 (no parser for NDJSON).
        this.#giveBack(response.statusCode === 404 || response.statusCode === 415 ? { kind: 'unsupported', error } : { kind: 'refused', error });
        return;
      }
      const read = lineReader((line) => this.#take(line));
      for await (const chunk of response.body) read(chunk as Buffer);
      this.#ending = true;
      // The answer ended with calls unanswered: the dispatcher went away (or shut down) mid-stream.
      this.#giveBack({ kind: 'lost', error: Object.assign(new Error('the dispatcher ended the call stream before answering every call'), { code: 'UND_ERR_CLOSED' }) });
    } catch (error) {
      this.#ending = true;
      this.#giveBack({ kind: 'lost', error });
    } finally {
      clearTimeout(startTimer);
      clearTimeout(this.#idle);
      this.#finished = true;
      if (!this.#body.destroyed) this.#body.destroy();
      void this.#connection.close().catch(() => undefined);
      this.#o.onEnd();
    }
  }
}
