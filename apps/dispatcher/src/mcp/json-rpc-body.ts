import {
  CallToolRequestSchema,
  CancelledNotificationSchema,
  ErrorCode,
  InitializedNotificationSchema,
  InitializeRequestSchema,
  JSONRPCMessageSchema,
  ListToolsRequestSchema,
  PingRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { SubmitCallRequest } from '@forge-fleet/shared';

/** The SDK's schemas share this much: a safe parse that names each problem's path. */
interface MessageSchema {
  safeParse(value: unknown): { success: true } | { success: false; error: { issues: readonly { path: readonly PropertyKey[]; message: string }[] } };
}

/**
 * The requests `/mcp` serves, each with the schema its params must fit (the
 * SDK's own) and what a client should send. One table: the SDK's handlers
 * would parse the same schemas and answer a misfit as -32603 with the zod
 * issues as its message; here it is -32602 with one line.
 */
const REQUESTS: Readonly<Record<string, { schema: MessageSchema; send: string }>> = {
  initialize: { schema: InitializeRequestSchema, send: '{ protocolVersion, capabilities: {}, clientInfo: { name, version } }' },
  ping: { schema: PingRequestSchema, send: 'no params, or {}' },
  'tools/list': { schema: ListToolsRequestSchema, send: '{} or { cursor: <the nextCursor of the previous page> }' },
  'tools/call': { schema: CallToolRequestSchema, send: '{ name: "<tool>", arguments: { … } } (arguments an object, when given)' },
};

/** The notifications `/mcp` acts on; any other notification is accepted and ignored, as JSON-RPC wants. */
const NOTIFICATIONS: Readonly<Record<string, { schema: MessageSchema; send: string }>> = {
  'notifications/cancelled': { schema: CancelledNotificationSchema, send: '{ requestId: <the id of the request to cancel>, reason? }' },
  'notifications/initialized': { schema: InitializedNotificationSchema, send: 'no params, or {}' },
};

/** The first MCP revision without JSON-RPC batches (a POST body MUST be a single message from then on). */
const NO_BATCHES_SINCE = '2025-06-18';

/** A JSON-RPC error answer of `/mcp`: its HTTP status and body. */
export interface JsonRpcRefusal {
  readonly status: number;
  readonly body: { jsonrpc: '2.0'; id?: string | number | null; error: { code: number; message: string; data?: Record<string, unknown> } };
}

/** Why a message does not fit, and whom to tell: the request's id, or none (a notification, or an unreadable message). */
interface Misfit {
  readonly code: ErrorCode;
  readonly message: string;
  /** The id of a well-formed request: its error is its answer (HTTP 200), not a refusal of the body. */
  readonly id?: string | number;
  readonly notification?: true;
}

const refusal = (status: number, code: ErrorCode, message: string, id?: string | number | null): JsonRpcRefusal => ({
  status,
  body: { jsonrpc: '2.0', ...(id === undefined ? {} : { id }), error: { code, message } },
});

/** A JSON-RPC 2.0 answer for a body that is not JSON (or that JSON refuses to be here: `__proto__`). */
export function parseRefusal(problem: 'not-json' | 'forbidden-key'): JsonRpcRefusal {
  return problem === 'not-json'
    ? refusal(400, ErrorCode.ParseError, 'Parse error: the body is not JSON; send one JSON-RPC 2.0 message as a JSON object', null)
    : refusal(400, ErrorCode.InvalidRequest, 'Invalid Request: a "__proto__" or "constructor.prototype" key is not accepted anywhere in the body', null);
}

/** JSON-RPC's implementation-defined server-error code, which the SDK's transport answers a refused media type with. */
const SERVER_ERROR = -32000;

/**
 * A JSON-RPC 2.0 answer (415) for a body in a media type `/mcp` does not read,
 * naming the type sent (`contentType`: its media type, `none` when no type was
 * sent) in the message and in `data`, beside the fleet's code.
 */
export function mediaTypeRefusal(contentType: string): JsonRpcRefusal {
  return {
    status: 415,
    body: {
      jsonrpc: '2.0',
      id: null,
      error: {
        code: SERVER_ERROR,
        message: `Unsupported Media Type: a body of content-type '${contentType}' is not read here; send one JSON-RPC 2.0 message as application/json`,
        data: { code: 'UNSUPPORTED_MEDIA_TYPE', contentType },
      },
    },
  };
}

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

const kindOf = (value: unknown): string => (value === null ? 'null' : Array.isArray(value) ? 'array' : typeof value);

/** `params.name: expected string, received undefined; …` (at most three problems, one line). */
function issuesOf(error: { issues: readonly { path: readonly PropertyKey[]; message: string }[] }): string {
  return error.issues
    .slice(0, 3)
    .map((i) => `${i.path.map(String).join('.') || 'params'}: ${i.message.replace(/^Invalid input: /, '').replace('expected record', 'expected object')}`)
    .join('; ');
}

const MEMBERS = new Set(['jsonrpc', 'id', 'method', 'params', 'result', 'error']);

/** What is wrong with one message of a body, or undefined when the SDK can take it. */
function misfitOf(message: unknown): Misfit | undefined {
  const invalid = (why: string): Misfit => ({ code: ErrorCode.InvalidRequest, message: `Invalid Request: ${why}` });
  if (!isObject(message)) return invalid(`a JSON-RPC message is an object { jsonrpc: "2.0", … }, not ${kindOf(message)}`);
  if (message['jsonrpc'] !== '2.0') return invalid('jsonrpc must be "2.0"');
  const extra = Object.keys(message).find((key) => !MEMBERS.has(key));
  if (extra !== undefined) return invalid(`unexpected member "${extra}" (a message has jsonrpc, id, method, params, or result / error)`);
  const { id, method, params } = message;
  const hasId = 'id' in message;
  if (hasId && !(typeof id === 'string' || Number.isSafeInteger(id))) return invalid('id must be a string or an integer');
  if (!('method' in message)) {
    // A response (the server sends no requests, so it is ignored); it still has to be one.
    return JSONRPCMessageSchema.safeParse(message).success ? undefined : invalid('a message needs a method (request, notification), or an id with result or error (response)');
  }
  if (typeof method !== 'string') return invalid('method must be a string');
  if ('result' in message || 'error' in message) return invalid('a request or notification has no result or error');
  const request = hasId ? { id: id as string | number } : { notification: true as const };
  const known = (hasId ? REQUESTS : NOTIFICATIONS)[method];
  if (hasId && known === undefined) {
    return { ...request, code: ErrorCode.MethodNotFound, message: `Method not found: "${method}"; this server serves ${Object.keys(REQUESTS).join(', ')}` };
  }
  const invalidParams = (why: string, send: string | undefined): Misfit => ({ ...request, code: ErrorCode.InvalidParams, message: `Invalid params for ${method}: ${why}${send === undefined ? '' : `; send ${send}`}` });
  if ('params' in message && !isObject(params)) return invalidParams(`params must be an object, not ${kindOf(params)}`, known?.send);
  const checked = (known?.schema ?? JSONRPCMessageSchema).safeParse(known === undefined ? message : { method, ...(params === undefined ? {} : { params }) });
  if (!checked.success) return invalidParams(issuesOf(checked.error), known?.send);
  // The name as /v1 takes it (1–128 characters), with the same words: a name no tool can have is a bad request on
  // every entrance, not a tool that was not found.
  if (method === 'tools/call' && isObject(params)) {
    const name = SubmitCallRequest.shape.name.safeParse(params['name']);
    if (!name.success) return invalidParams(issuesOf({ issues: name.error.issues.map((i) => ({ ...i, path: ['params', 'name'] })) }), known?.send);
  }
  // A task-augmented call asks for a capability this server does not declare (the SDK would call it an internal error).
  // The fleet runs the tools an MCP server runs only as tasks as tasks itself; its callers call them plainly.
  if (method === 'tools/call' && isObject(params) && 'task' in params) {
    return invalidParams('this server does not support tasks (its capabilities declare none), so params.task is not taken', 'the same tools/call without task: a long call streams its progress when you send a progressToken');
  }
  // What the transport parses with: anything it would refuse must be refused here (it would call it a parse error).
  return JSONRPCMessageSchema.safeParse(message).success ? undefined : invalid('the message does not fit JSON-RPC 2.0');
}

/**
 * Checks a `/mcp` body before the SDK's transport sees it, and answers what
 * does not fit as JSON-RPC and the MCP Streamable HTTP transport say:
 *
 * - not a message (a number, a string, null, `[]`, `[1]`, no `jsonrpc: "2.0"`…):
 *   `-32600 Invalid Request`, HTTP 400, id null;
 * - a batch (an array) from a client of MCP 2025-06-18 or later (its
 *   `MCP-Protocol-Version` header), which removed batching: `-32600`, 400.
 *   Without the header the spec has the server assume 2025-03-26, which allowed
 *   non-empty batches: those pass when every member fits;
 * - a request for a method not served: `-32601 Method not found`, answered
 *   with the request's id (HTTP 200, as any answer to a request);
 * - a request whose params do not fit its method: `-32602 Invalid params`,
 *   with the request's id and one line saying what to send;
 * - a notification whose params do not fit: `-32602`, HTTP 400, no id.
 *
 * In a batch, any member that does not fit refuses the whole batch (400).
 * @returns the refusal, or undefined when the body goes to the transport.
 */
export function checkBody(body: unknown, protocolVersion: string | undefined): JsonRpcRefusal | undefined {
  if (Array.isArray(body)) {
    if (protocolVersion !== undefined && protocolVersion >= NO_BATCHES_SINCE) {
      return refusal(400, ErrorCode.InvalidRequest, `Invalid Request: MCP ${protocolVersion} takes one JSON-RPC message per POST (batches were removed in ${NO_BATCHES_SINCE}); send each message on its own`, null);
    }
    if (body.length === 0) return refusal(400, ErrorCode.InvalidRequest, 'Invalid Request: an empty batch; send one JSON-RPC message (an object)', null);
    for (const [i, member] of body.entries()) {
      const misfit = misfitOf(member);
      // A member for a method not served gets its own -32601 answer from the SDK, as JSON-RPC batches want.
      if (misfit !== undefined && misfit.code !== ErrorCode.MethodNotFound) return refusal(400, misfit.code, `batch member ${i}: ${misfit.message}`, null);
    }
    return undefined;
  }
  const misfit = misfitOf(body);
  if (misfit === undefined) return undefined;
  if (misfit.id !== undefined) return refusal(200, misfit.code, misfit.message, misfit.id);
  return refusal(400, misfit.code, misfit.message, misfit.notification === true ? undefined : null);
}
