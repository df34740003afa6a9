import { type CallToolRequest, ErrorCode, type JSONRPCMessage, SUPPORTED_PROTOCOL_VERSIONS } from '@modelcontextprotocol/sdk/types.js';
import type { IncomingHttpHeaders, ServerResponse } from 'node:http';

/**
 * A `tools/call` that `/mcp` answers itself, without a per-request SDK server
 * and transport. Those cost the dispatcher ~1.9 ms of CPU per call (the SDK
 * turns the Node request into a web `Request`, builds a server, a transport
 * and a web stream for one message): five times the call itself. A plain call
 * — one request, no progress token, no task — needs none of it: its answer is
 * the SDK's message, written here as one JSON body (see writeDirectAnswer). Anything
 * else (progress, tasks, other methods, headers the transport would refuse)
 * still goes through the SDK, so every answer but the fast one is the SDK's.
 */
export interface DirectCall {
  readonly id: string | number;
  readonly request: CallToolRequest;
}

/** The members a plain `tools/call`'s params may have; any other (a `task`, say) is the SDK's to serve. */
const PLAIN_PARAMS = new Set(['name', 'arguments', '_meta']);

const SUPPORTED: ReadonlySet<string> = new Set(SUPPORTED_PROTOCOL_VERSIONS);

/** The media type of a header, as the transport reads Content-Type: lower-cased, parameters dropped. */
const essence = (value: string | undefined): string | undefined => value?.split(';', 1)[0]?.trim().toLowerCase();

/**
 * The call, when `message` (already accepted by checkBody) is a plain
 * `tools/call` and the headers are ones the SDK's transport would serve;
 * otherwise undefined, and the request takes the SDK's path.
 */
export function directCallOf(message: unknown, headers: IncomingHttpHeaders): DirectCall | undefined {
  if (typeof message !== 'object' || message === null || Array.isArray(message)) return undefined;
  const { method, id, params } = message as { method?: unknown; id?: unknown; params?: unknown };
  if (method !== 'tools/call' || !(typeof id === 'string' || typeof id === 'number')) return undefined;
  if (typeof params !== 'object' || params === null) return undefined;
  for (const key of Object.keys(params)) if (!PLAIN_PARAMS.has(key)) return undefined;
  const meta = (params as { _meta?: Record<string, unknown> })._meta;
  if (meta !== undefined && 'progressToken' in meta) return undefined;
  // The transport's own checks, in its order: what it would refuse (406, 415, 400) it refuses, on its path.
  const accept = headers.accept;
  if (typeof accept !== 'string' || !accept.includes('application/json') || !accept.includes('text/event-stream')) return undefined;
  if (essence(headers['content-type']) !== 'application/json') return undefined;
  const version = headers['mcp-protocol-version'];
  if (version !== undefined && (typeof version !== 'string' || !SUPPORTED.has(version))) return undefined;
  return { id, request: { method: 'tools/call', params: params as CallToolRequest['params'] } };
}

/** The JSON-RPC error the SDK's protocol layer answers a handler's throw with. */
export function internalErrorOf(id: string | number, error: unknown): JSONRPCMessage {
  const e = error as { code?: unknown; message?: unknown; data?: unknown } | undefined;
  const code = typeof e?.code === 'number' && Number.isSafeInteger(e.code) ? e.code : ErrorCode.InternalError;
  const message = typeof e?.message === 'string' ? e.message : 'Internal error';
  return { jsonrpc: '2.0', id, error: { code, message, ...(e?.data === undefined ? {} : { data: e.data }) } };
}

/** The headers the SDK's transport answers a request with when it opens an event stream. */
const STREAM_HEADERS = { 'content-type': 'text/event-stream', 'cache-control': 'no-cache, no-transform', connection: 'keep-alive', 'x-accel-buffering': 'no' };

/** The headers of a response that is one JSON-RPC message. */
const JSON_HEADERS = { 'content-type': 'application/json' };

/**
 * Writes the answer as one JSON body (`application/json`), which Streamable
 * HTTP lets a server send instead of an event stream when a request gets its
 * response and nothing before it — a plain call sends no progress, so it
 * never needs the stream. Every client must read both; a JSON body costs the
 * official SDK client ~0.3 ms less CPU per call than parsing one event (its
 * SSE parser runs through web streams): measured with its `Client` against
 * both framings, 0.79 → 0.48 ms at 1 in flight, 0.53–0.84 → 0.34–0.47 ms at 64.
 * Without a message (the request was cancelled: JSON-RPC sends no answer
 * then) there is no JSON to send, so the stream opens and just ends, as the
 * SDK's does when its server closes.
 */
export function writeDirectAnswer(res: ServerResponse, message: JSONRPCMessage | undefined): void {
  if (res.writableEnded || res.destroyed) return;
  if (message === undefined) {
    res.writeHead(200, STREAM_HEADERS);
    res.end();
    return;
  }
  res.writeHead(200, JSON_HEADERS);
  res.end(JSON.stringify(message));
}
