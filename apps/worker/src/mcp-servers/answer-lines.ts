import { type JSONRPCMessage, JSONRPCMessageSchema, McpError } from '@modelcontextprotocol/sdk/types.js';

/**
 * The bound on one server message for a worker whose results may take `maxResultBytes`
 * (FORGE_MAX_RESULT_BYTES): {@link MAX_MESSAGE_BYTES}, or more where results may be larger, with room for the
 * JSON-RPC envelope around the result.
 */
export function messageBoundFor(maxResultBytes: number): number {
  return Math.max(MAX_MESSAGE_BYTES, maxResultBytes + 64 * 1024);
}

/**
 * The most bytes one message of a stdio server may take by default. Past it the message
 * is dropped as it streams in, never held whole. A result this large is far
 * past the default `FORGE_MAX_RESULT_BYTES` (1 MiB), which the fleet would
 * refuse anyway once parsed; a worker with a larger one raises the bound
 * ({@link messageBoundFor}).
 */
export const MAX_MESSAGE_BYTES = 16 * 1024 * 1024;

/** What of an oversized message is kept to find its request id: JSON-RPC writers put `id` first or last. */
const EDGE_BYTES = 512;

/** The JSON-RPC error code of the answer the worker makes up for a dropped one (JSON-RPC's server-error range). */
const ANSWER_TOO_LARGE = -32090;

/** The JSON-RPC code of the answer the worker makes up for one that is neither a result nor an error. */
const NOT_AN_ANSWER = -32091;
/** Marks it, with what was wrong (see {@link notAnAnswer}). */
const NOT_AN_ANSWER_MARK = 'forgeNotAnAnswer';

/** The JSON-RPC code of the answer the worker makes up for a request whose answer broke off on its way (see {@link cutAnswer}). */
const ANSWER_CUT = -32092;
/** Marks it, with how it broke off. */
const ANSWER_CUT_MARK = 'forgeAnswerCut';

/** Marks that answer as the worker's own: a server may send any code, but not this key in its data. */
const MARK = 'forgeDroppedAnswerBytes';
const AT_LEAST = 'forgeDroppedAnswerUnread';
const BOUND = 'forgeMessageBound';

/** A request id at the very start (`{"jsonrpc":"2.0","id":7,…`, `{"id":7,…`) or end (`…,"id":7}`) of a message. */
const ID_AT_START = /^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")/;
const ID_AT_END = /[,{]\s*"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")\s*\}\s*$/;

/**
 * Splits a stdio server's output into JSON-RPC messages, as the SDK's
 * ReadBuffer does, but with each message bounded rather than the whole
 * buffer. The SDK's reader closes the connection when its buffer passes
 * 10 MB: one oversized result (a 20 MB file read) killed the instance, ended
 * every call on it MCP_SERVER_LOST, and counted towards the crash loop that
 * withdraws the server's tools from every caller. Here an oversized message
 * is dropped as it arrives; if it was an answer, its request gets an error
 * answer instead ({@link tooLargeBytes}), so only that call fails, with
 * RESOURCE_LIMIT, and the instance serves on. Lines are also gathered as a
 * list of chunks, not by copying the buffer on every chunk.
 *
 * It has the SDK reader's three methods, which the SDK's stdio transport calls.
 */
export class AnswerLines {
  readonly #maxBytes: number;
  /** The unfinished line's chunks, and their length. */
  #parts: Buffer[] = [];
  #size = 0;
  /** An oversized line being dropped: its length so far, its first and its latest bytes. */
  #dropping: { bytes: number; head: Buffer; tail: Buffer } | undefined;
  /** Finished lines (text to parse) and made-up answers, in order. */
  readonly #ready: (string | JSONRPCMessage)[] = [];

  constructor(maxBytes = MAX_MESSAGE_BYTES) {
    this.#maxBytes = maxBytes;
  }

  append(chunk: Buffer): void {
    let start = 0;
    while (start <= chunk.length) {
      const newline = chunk.indexOf(10, start);
      const end = newline === -1 ? chunk.length : newline;
      if (end > start) this.#take(chunk.subarray(start, end));
      if (newline === -1) return;
      this.#endLine();
      start = newline + 1;
    }
  }

  /** The next message, or null when no whole line is waiting. @throws what parsing a line that is not a JSON-RPC message throws (the SDK logs it and reads on). */
  readMessage(): JSONRPCMessage | null {
    const next = this.#ready.shift();
    if (next === undefined) return null;
    return typeof next === 'string' ? serverMessage(JSON.parse(next)) : next;
  }

  clear(): void {
    this.#parts = [];
    this.#size = 0;
    this.#dropping = undefined;
  }

  #take(part: Buffer): void {
    const dropping = this.#dropping;
    if (dropping !== undefined) {
      dropping.bytes += part.length;
      dropping.tail = lastBytes(dropping.tail, part);
      return;
    }
    if (this.#size + part.length <= this.#maxBytes) {
      this.#parts.push(part);
      this.#size += part.length;
      return;
    }
    // Only the edges of what was held are kept, and only they are copied: the rest may be megabytes.
    const held = [...this.#parts, part];
    this.#dropping = { bytes: this.#size + part.length, head: firstBytesOf(held), tail: lastBytesOf(held) };
    this.#parts = [];
    this.#size = 0;
  }

  #endLine(): void {
    const dropping = this.#dropping;
    if (dropping !== undefined) {
      this.#dropping = undefined;
      const id = idOf(dropping.head, dropping.tail);
      // Without an id it was a notification (or not JSON-RPC): nothing waits for it.
      if (id !== undefined) {
        this.#ready.push(tooLargeAnswer(id, dropping.bytes, this.#maxBytes));
      }
      return;
    }
    if (this.#size === 0) return;
    // A byte-order mark some writers put first (Windows tools, PowerShell) is no part of the message.
    const line = (this.#parts.length === 1 ? (this.#parts[0] as Buffer) : Buffer.concat(this.#parts, this.#size)).toString('utf8').replace(/\r$/, '').replace(/^\uFEFF/, '');
    this.#parts = [];
    this.#size = 0;
    this.#ready.push(line);
  }
}

/**
 * The answer the worker makes up for a request whose answer it dropped for
 * being over `maxBytes` (here, and in bounded-fetch.ts for HTTP upstreams).
 *
 * @param atLeast the answer was not read to its end: `bytes` is what was read of it
 */
export function tooLargeAnswer(id: string | number, bytes: number, maxBytes: number, atLeast = false): JSONRPCMessage {
  return {
    jsonrpc: '2.0',
    id,
    error: { code: ANSWER_TOO_LARGE, message: `the server's answer was ${atLeast ? 'over ' : ''}${bytes} bytes, over the ${maxBytes} a message may be`, data: { [MARK]: bytes, [AT_LEAST]: atLeast, [BOUND]: maxBytes } },
  };
}

/**
 * A server's message as the SDK's client takes it. An answer to a request
 * that is neither a result nor an error — a `result` that is null, a number
 * or an array, no `result` and no `error`, an `error` without an integer
 * `code` and a string `message` — becomes an error answer of the worker's
 * own to that request ({@link notAnAnswer}). The SDK drops such a message as
 * no message at all, and the call it answered waited for its timeout.
 *
 * @throws what JSONRPCMessageSchema throws for anything else that is not a JSON-RPC message (the SDK logs it and reads on).
 */
export function serverMessage(value: unknown): JSONRPCMessage {
  const parsed = JSONRPCMessageSchema.safeParse(value);
  if (parsed.success) return parsed.data;
  // The schema refused it: an answer to a request that looks whole (its `jsonrpc` wrong, say) is still refused.
  const answer = badAnswer(value, 'it is not a JSON-RPC 2.0 answer');
  if (answer === undefined) throw parsed.error;
  return answer;
}

/**
 * The error answer the worker makes up for `value` when it answers a request
 * (an `id` and no `method`) with neither a result nor an error (or, with
 * `otherwise`, with anything else: the reason given); undefined for anything else. Checked by hand, for transports that pass on what the
 * upstream sent without the SDK's schema (modern-http-transport.ts).
 */
export function badAnswer(value: unknown, otherwise?: string): JSONRPCMessage | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  const m = value as Record<string, unknown>;
  if ('method' in m || (typeof m.id !== 'string' && typeof m.id !== 'number')) return undefined;
  const what = whatIsWrong(m) ?? otherwise;
  if (what === undefined) return undefined;
  return { jsonrpc: '2.0', id: m.id, error: { code: NOT_AN_ANSWER, message: `the server's answer is neither a result nor an error: ${what}`, data: { [NOT_AN_ANSWER_MARK]: what } } };
}

function whatIsWrong(m: Record<string, unknown>): string | undefined {
  if ('result' in m) return typeof m.result === 'object' && m.result !== null && !Array.isArray(m.result) ? undefined : `its result is ${kindOf(m.result)}, not an object`;
  if (!('error' in m)) return 'it holds neither `result` nor `error`';
  const error = m.error as { code?: unknown; message?: unknown } | null;
  if (typeof error !== 'object' || error === null || !Number.isInteger(error.code) || typeof error.message !== 'string') return 'its error has no integer `code` and string `message`';
  return undefined;
}

/** What kind of JSON value `value` is, for people: `a string`, `an object`, `null`. */
export function kindOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  const kind = typeof value;
  return kind === 'object' ? 'an object' : `a ${kind}`;
}

/** What was wrong with a server's answer, when `err` is the error the worker made up for it ({@link badAnswer}); else undefined. */
export function notAnAnswer(err: unknown): string | undefined {
  if (!(err instanceof McpError) || err.code !== NOT_AN_ANSWER) return undefined;
  const what = (err.data as Record<string, unknown> | undefined)?.[NOT_AN_ANSWER_MARK];
  return typeof what === 'string' ? what : undefined;
}

/**
 * The answer the worker makes up for request `id` whose answer broke off on its way (an HTTP upstream's connection
 * reset in the middle of it, `why`): the server got the request, so whether it took effect is unknown, and the call
 * ends as one whose instance ended under it does (MCP_SERVER_LOST), while the session serves on.
 */
export function cutAnswer(id: string | number, why: string): JSONRPCMessage {
  return { jsonrpc: '2.0', id, error: { code: ANSWER_CUT, message: `the server's answer broke off: ${why}`, data: { [ANSWER_CUT_MARK]: why } } };
}

/** How a server's answer broke off, when `err` is the error the worker made up for it ({@link cutAnswer}); else undefined. */
export function answerCut(err: unknown): string | undefined {
  if (!(err instanceof McpError) || err.code !== ANSWER_CUT) return undefined;
  const why = (err.data as Record<string, unknown> | undefined)?.[ANSWER_CUT_MARK];
  return typeof why === 'string' ? why : undefined;
}

/** The size of the answer dropped for being too large, when `err` is the error of such a request; else undefined. */
export function tooLargeBytes(err: unknown): { bytes: number; atLeast: boolean; bound: number } | undefined {
  if (!(err instanceof McpError) || err.code !== ANSWER_TOO_LARGE) return undefined;
  const data = err.data as Record<string, unknown> | undefined;
  const bytes = data?.[MARK];
  const bound = data?.[BOUND];
  return typeof bytes === 'number' && typeof bound === 'number' ? { bytes, atLeast: data?.[AT_LEAST] === true, bound } : undefined;
}

/** The last {@link EDGE_BYTES} of `before` followed by `part`. */
function lastBytes(before: Buffer, part: Buffer): Buffer {
  if (part.length >= EDGE_BYTES) return Buffer.from(part.subarray(part.length - EDGE_BYTES));
  return Buffer.from(Buffer.concat([before, part]).subarray(-EDGE_BYTES));
}

/** The first {@link EDGE_BYTES} of `parts` end to end, copying no more of them than that. */
function firstBytesOf(parts: readonly Buffer[]): Buffer {
  const edge: Buffer[] = [];
  for (let i = 0, left = EDGE_BYTES; i < parts.length && left > 0; i += 1) {
    const piece = (parts[i] as Buffer).subarray(0, left);
    edge.push(piece);
    left -= piece.length;
  }
  return Buffer.concat(edge);
}

/** The last {@link EDGE_BYTES} of `parts` end to end, copying no more of them than that. */
function lastBytesOf(parts: readonly Buffer[]): Buffer {
  const edge: Buffer[] = [];
  for (let i = parts.length - 1, left = EDGE_BYTES; i >= 0 && left > 0; i -= 1) {
    const part = parts[i] as Buffer;
    const piece = part.subarray(Math.max(0, part.length - left));
    edge.unshift(piece);
    left -= piece.length;
  }
  return Buffer.concat(edge);
}

function idOf(head: Buffer, tail: Buffer): string | number | undefined {
  const found = ID_AT_START.exec(head.toString('latin1'))?.[1] ?? ID_AT_END.exec(tail.toString('latin1'))?.[1];
  if (found === undefined) return undefined;
  try {
    const id: unknown = JSON.parse(found);
    return typeof id === 'string' || typeof id === 'number' ? id : undefined;
  } catch {
    return undefined;
  }
}
