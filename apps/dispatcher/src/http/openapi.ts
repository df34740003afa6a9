import { readFileSync } from 'node:fs';
import {
  ApprovalDecisionRequest,
  ApprovalList,
  CallView,
  MAX_BATCH_CALLS,
  PendingApproval,
  QueueStats,
  QueueStatsList,
  SubmitBatchRequest,
  SubmitCallRequest,
  Tier,
  ToolCallId,
  ToolDefinition,
  ToolResult,
  WireError,
} from '@forge-fleet/shared';
import type { StoredAuditEntry } from '@forge-fleet/store';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { AuditQuery } from './audit.js';
import { ApprovalListQuery } from './approvals.js';
import { WaitQuery } from './calls.js';
import { Policy } from '../approvals/policy-file.js';

/** A JSON object as it goes into the document. */
type Json = { [key: string]: unknown };

/** The OpenAPI 3.1 document `GET /openapi.json` answers with. */
export interface OpenApiDocument {
  readonly openapi: string;
  readonly info: { readonly title: string; readonly version: string; readonly description: string };
  readonly security: readonly Json[];
  readonly paths: Readonly<Record<string, Readonly<Record<string, Json>>>>;
  readonly components: {
    readonly schemas: Readonly<Record<string, Json>>;
    readonly parameters: Readonly<Record<string, Json>>;
    readonly securitySchemes: Readonly<Record<string, Json>>;
  };
}

const OPENAPI_VERSION = '3.1.1';

const ref = (id: string): string => `#/components/schemas/${id}`;

// ---------------------------------------------------------------------------
// Schemas. Wherever a route validates with a zod schema, the document is made
// from that very schema; the few shapes below exist only because the routes
// build those answers inline (and each is tied to its source by a type check).
// ---------------------------------------------------------------------------


/** A tool definition as `GET /v1/tools` answers with it: parsed, so `tier` is a {@link Tier} (the input's `external` is gone). */
const ToolDefinitionView = ToolDefinition.extend({ tier: Tier });

/** Every error answer (errors.ts `errorBody`): the details sit beside `code`, `message` and `retryable`. */
const ErrorBody = z.object({ error: WireError.pick({ code: true, message: true, retryable: true }).catchall(z.unknown()) });

/** One NDJSON line of `POST /v1/calls/batch`: the call's view or its error, with its position in the request. */
const batchIndex = z
  .number()
  .int()
  .min(0)
  .max(MAX_BATCH_CALLS - 1);
const BatchLine = z.union([CallView.extend({ index: batchIndex }), ErrorBody.extend({ index: batchIndex })]);
/** One NDJSON line of a `POST /v1/calls/stream` answer: the call's view (it carries its id), its error with its id, or the error of a line without a usable id with the line's number. */
const StreamLine = z.union([CallView, ErrorBody.extend({ id: z.string() }), ErrorBody.extend({ line: z.number().int().min(1) })]);

const Health = z.object({ ok: z.boolean() });
const ToolList = z.object({ tools: z.array(ToolDefinitionView) });

/** An audit entry as `GET /v1/audit` answers with it (the store's `StoredAuditEntry`, checked below). */
const AuditEntry = z.object({
  id: z.string(),
  at: z.string(),
  decision: AuditQuery.shape.decision.unwrap().exactOptional(),
  category: AuditQuery.shape.category.unwrap().exactOptional(),
  code: z.string().exactOptional(),
  callId: z.string().exactOptional(),
  tool: z.string().exactOptional(),
  errorCategory: z.enum(['out_of_scope', 'forged_call']).exactOptional(),
  scopeAtListing: z.string().nullable().exactOptional(),
  scopeAtDispatch: z.string().exactOptional(),
  caller: z.string().exactOptional(),
  role: z.string().exactOptional(),
  tier: z.string().exactOptional(),
  route: z.string().exactOptional(),
  reason: z.string().exactOptional(),
  decidedBy: z.string().exactOptional(),
  arguments: z.record(z.string(), z.unknown()).exactOptional(),
  editedArguments: z.record(z.string(), z.unknown()).exactOptional(),
  /** Who wrote it: `dispatcher`, or the lane of the worker. */
  writer: z.string().exactOptional(),
});
const AuditPage = z.object({ entries: z.array(AuditEntry) });

// Compile-time ties to the types the routes answer with: a field added to either side without the other fails tsc.
// (Optional fields make object types assignable whatever their names, hence the check on the keys as well.)
type Mutual<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
type Same<A, B> = Mutual<A, B> extends true ? Mutual<keyof A, keyof B> : false;
const sameAuditEntry: Same<z.output<typeof AuditEntry>, StoredAuditEntry> = true;
const sameToolDefinition: Same<z.output<typeof ToolDefinitionView>, ToolDefinition> = true;
void sameAuditEntry;
void sameToolDefinition;

/** Request bodies: described as clients send them (`io: 'input'`: defaulted fields are optional). */
const REQUEST_SCHEMAS = { SubmitCallRequest, SubmitBatchRequest, ApprovalDecisionRequest } satisfies Record<string, z.ZodType>;

/** `GET /v1/policy`: the policy schema itself, and its source. */
const PolicyView = z.object({ source: z.string(), policy: Policy });

/** Answers: described as the dispatcher sends them (`io: 'output'`: defaults filled in). */
const RESPONSE_SCHEMAS = {
  CallView,
  ToolResult,
  WireError,
  ErrorBody,
  BatchLine,
  StreamLine,
  ToolDefinition: ToolDefinitionView,
  ToolList,
  AuditEntry,
  AuditPage,
  PendingApproval,
  ApprovalList,
  PolicyView,
  QueueStats,
  QueueStatsList,
  Health,
} satisfies Record<string, z.ZodType>;

/** Converts named zod schemas into `components.schemas` entries that `$ref` each other. */
function componentSchemas(schemas: Record<string, z.ZodType>, io: 'input' | 'output'): Record<string, Json> {
  const registry = z.registry<{ id: string }>();
  for (const [id, schema] of Object.entries(schemas)) registry.add(schema, { id });
  const { schemas: converted } = z.toJSONSchema(registry, {
    target: 'draft-2020-12',
    io,
    uri: ref,
    override: ({ zodSchema, jsonSchema }) => {
      // Batch items are validated one by one (so a bad call fails alone on its line): the body schema
      // accepts anything per item, but what each item must be is a SubmitCallRequest.
      if (zodSchema === SubmitBatchRequest.shape.calls.element) jsonSchema.$ref = ref('SubmitCallRequest');
    },
  });
  // OpenAPI 3.1 schemas are JSON Schema 2020-12 already (the document's default dialect); a
  // fragment-only `$id` is not a valid 2020-12 `$id`, and components are addressed by `$ref` anyway.
  return Object.fromEntries(
    Object.entries(converted).map(([id, schema]) => {
      const { $schema: _dialect, $id: _id, ...rest } = schema as Json;
      return [id, rest];
    }),
  );
}

/** A standalone schema (a parameter), without the `$schema` line. */
function inlineSchema(schema: z.ZodType): Json {
  const { $schema: _dialect, ...rest } = z.toJSONSchema(schema, { target: 'draft-2020-12', io: 'input' }) as Json;
  return rest;
}

/** Each property of a query schema as an OpenAPI query parameter. */
function queryParameters(schema: z.ZodObject, descriptions: Readonly<Record<string, string>> = {}): Json[] {
  const json = inlineSchema(schema) as { properties?: Record<string, Json>; required?: string[] };
  return Object.entries(json.properties ?? {}).map(([name, property]) => ({
    name,
    in: 'query',
    required: json.required?.includes(name) ?? false,
    ...(descriptions[name] === undefined ? {} : { description: descriptions[name] }),
    schema: property,
  }));
}

function queryParameter(schema: z.ZodObject, name: string, description: string): Json {
  const found = queryParameters(schema, { [name]: description }).find((p) => p['name'] === name);
  if (found === undefined) throw new Error(`query schema has no parameter '${name}'`);
  return found;
}

// ---------------------------------------------------------------------------
// Operations. Statuses and codes as docs/http-api.md gives them.
// ---------------------------------------------------------------------------

const json = (schemaId: string, description: string): Json => ({ description, content: { 'application/json': { schema: { $ref: ref(schemaId) } } } });
const body = (schemaId: string, description: string): Json => ({ required: true, description, content: { 'application/json': { schema: { $ref: ref(schemaId) } } } });

/** Error answers by status; each operation picks the ones it can give. */
const ERRORS = {
  400: 'BAD_REQUEST: malformed body, query or id, unknown `x-forge-task` (dev mode), arguments nested too deep (details.maxDepth), a prototype key (details.key)',
  401: 'UNAUTHENTICATED: no token, or a token this fleet does not accept; the answer carries `WWW-Authenticate: Bearer realm="forge-fleet"` (with `error="invalid_token"` when a token was refused)',
  403: 'FORBIDDEN: the token role may not do this',
  404: 'not found',
  409: 'conflict',
  413: 'PAYLOAD_TOO_LARGE (details.limitBytes): body over FORGE_BODY_LIMIT_BYTES, or arguments over FORGE_MAX_ARGUMENT_BYTES',
  422: 'SCHEMA_VALIDATION (details.path, details.reason, details.issues: the first 100, details.issueCount): the arguments do not match the tool schema',
  500: 'INTERNAL',
  503: 'NO_WORKER: the tool is known but no live worker serves it now',
} as const;
type ErrorStatus = keyof typeof ERRORS;

function errors(statuses: Partial<Record<ErrorStatus, string>>): Json {
  const answers: Json = {};
  for (const [status, description] of Object.entries(statuses)) answers[status] = json('ErrorBody', description);
  answers['default'] = json('ErrorBody', 'Any other error (e.g. `500 INTERNAL`): `{ error: { code, message, retryable, …details } }`; codes in docs/errors.md.');
  return answers;
}

const param = (name: string): Json => ({ $ref: `#/components/parameters/${name}` });
const v1 = [param('ForgeTask')];
const callRoutes = [...v1, param('Wait')];
const callView200 = json('CallView', 'The call ended (`completed`, `failed` or `cancelled`); `result` is set.');
const callView202 = json('CallView', 'Not ended yet (`queued`, `running` or `awaiting_approval`, with `reason`).');
const noAuth: Json[] = [];

function buildPaths(): Record<string, Record<string, Json>> {
  return {
    '/healthz': {
      get: { operationId: 'healthz', summary: 'The process is up', security: noAuth, responses: { 200: json('Health', '`{ ok: true }`') } },
    },
    '/readyz': {
      get: {
        operationId: 'readyz',
        summary: 'The dispatcher can reach Redis (load balancers route on this)',
        security: noAuth,
        responses: { 200: json('Health', 'Ready: `{ ok: true }`'), 503: json('Health', 'Not ready: `{ ok: false }`') },
      },
    },
    '/metrics': {
      get: {
        operationId: 'metrics',
        summary: 'Prometheus metrics of this dispatcher (calls by outcome, queue depth, live workers, pending approvals)',
        security: noAuth,
        responses: { 200: { description: 'Prometheus text exposition format 0.0.4.', content: { 'text/plain': { schema: { type: 'string' } } } } },
      },
    },
    '/openapi.json': {
      get: {
        operationId: 'openapi',
        summary: 'This document',
        security: noAuth,
        responses: { 200: { description: 'The OpenAPI 3.1 document', content: { 'application/json': { schema: { type: 'object' } } } } },
      },
    },
    '/v1/tools': {
      get: {
        operationId: 'listTools',
        summary: 'The tools some live worker serves, filtered by the caller scope, sorted by name (any role)',
        parameters: v1,
        responses: { 200: json('ToolList', 'The tools'), ...errors({ 400: ERRORS[400], 401: ERRORS[401] }) },
      },
    },
    '/v1/calls': {
      post: {
        operationId: 'submitCall',
        summary: 'Submit a call and wait up to `wait` ms for its result (roles agent, admin)',
        parameters: callRoutes,
        requestBody: body('SubmitCallRequest', 'The call; an `id` makes the submission idempotent.'),
        responses: {
          200: callView200,
          202: callView202,
          ...errors({
            400: `${ERRORS[400]}; or a call id another subject submitted`,
            401: ERRORS[401],
            403: 'FORBIDDEN (the token role may not call tools), APPROVAL_DENIED (details.reason) or OUT_OF_SCOPE (details.scope)',
            404: 'TOOL_NOT_FOUND: no worker ever announced the tool',
            409: 'IDEMPOTENCY_CONFLICT (details.differs: tool | arguments): the id was already submitted with another tool or other arguments',
            413: ERRORS[413],
            422: ERRORS[422],
            503: `${ERRORS[503]}; or UNAVAILABLE: Redis could not be reached (the call was not accepted: send it again)`,
          }),
        },
      },
    },
    '/v1/calls/batch': {
      post: {
        operationId: 'submitBatch',
        summary: 'Submit several calls; each is answered on its own NDJSON line, in the order they end (roles agent, admin)',
        parameters: callRoutes,
        requestBody: body('SubmitBatchRequest', 'Up to 256 calls, each the body of `POST /v1/calls`; a bad call fails alone on its line.'),
        responses: {
          200: {
            description: 'One JSON line per call, `{ index, …CallView }` or `{ index, error }`, in the order the calls end.',
            // OpenAPI 3.1 has no item schema for sequential media types (3.2's `itemSchema`): by the usual
            // convention, the schema of an `application/x-ndjson` body describes one line.
            content: { 'application/x-ndjson': { schema: { $ref: ref('BatchLine') } } },
          },
          ...errors({ 400: ERRORS[400], 401: ERRORS[401], 403: 'FORBIDDEN: the token role may not call tools', 413: ERRORS[413] }),
        },
      },
    },
    '/v1/calls/stream': {
      post: {
        operationId: 'submitStream',
        summary: 'Submit calls as NDJSON lines of one long request body; each is answered on its own line of the response as it ends (roles agent, admin)',
        parameters: callRoutes,
        requestBody: {
          required: true,
          description: 'NDJSON (`content-type: application/x-ndjson`), sent for as long as the client has calls: one `SubmitCallRequest` per line, each with its `id` (answers are matched by it). Empty lines are skipped. A line takes new calls for 60 s after the stream opened; later lines are answered `UNAVAILABLE`, as are lines that arrive while the dispatcher shuts down.',
          content: { 'application/x-ndjson': { schema: { $ref: ref('SubmitCallRequest') } } },
        },
        responses: {
          200: {
            description: 'Begins at once (with an empty line); then one JSON line per call, `{ …CallView }` or `{ id, error }`, in the order the calls end, and `{ line, error }` for a line that is not a call. Ends once the request body has ended and every call is answered, or when the dispatcher shuts down (calls it holds answered first with their status).',
            content: { 'application/x-ndjson': { schema: { $ref: ref('StreamLine') } } },
          },
          ...errors({ 400: ERRORS[400], 401: ERRORS[401], 403: 'FORBIDDEN: the token role may not call tools' }),
        },
      },
    },
    '/v1/calls/{id}': {
      get: {
        operationId: 'getCall',
        summary: 'A call, waiting up to `wait` ms for it to end (its submitter or an admin)',
        parameters: [param('CallId'), ...callRoutes],
        responses: {
          200: callView200,
          202: callView202,
          ...errors({ 400: ERRORS[400], 401: ERRORS[401], 403: ERRORS[403], 404: 'CALL_NOT_FOUND: unknown id, or a call of another subject' }),
        },
      },
    },
    '/v1/calls/{id}/cancel': {
      post: {
        operationId: 'cancelCall',
        summary: 'Cancel a call; a running call ends `cancelled` when its worker confirms (waits up to 5 s)',
        parameters: [param('CallId'), ...v1],
        responses: {
          200: json('CallView', 'The call after cancellation (a call that had already ended, as it is).'),
          ...errors({ 400: ERRORS[400], 401: ERRORS[401], 403: ERRORS[403], 404: 'CALL_NOT_FOUND: unknown id, or a call of another subject' }),
        },
      },
    },
    '/v1/policy': {
      get: {
        operationId: 'readPolicy',
        summary: 'The effective policy and where it came from (admins only)',
        parameters: v1,
        responses: { 200: json('PolicyView', 'The policy'), ...errors({ 401: ERRORS[401], 403: 'FORBIDDEN: not an admin token' }) },
      },
    },
    '/v1/queues': {
      get: {
        operationId: 'listQueues',
        summary: 'Job counts (waiting, active, delayed, failed) and live workers per tier and pool queue (roles approver, admin)',
        parameters: v1,
        responses: {
          200: json('QueueStatsList', 'Every queue some worker has announced tools for, sorted by lane; counts are BullMQ jobs (a job may carry several calls)'),
          ...errors({ 401: ERRORS[401], 403: 'FORBIDDEN: not an approver or admin token' }),
        },
      },
    },
    '/v1/audit': {
      get: {
        operationId: 'queryAudit',
        summary: 'The audit stream, newest first, filtered (admins only)',
        parameters: [
          ...v1,
          ...queryParameters(AuditQuery, {
            since: 'Inclusive bound: epoch milliseconds or ISO-8601',
            until: 'Inclusive bound: epoch milliseconds or ISO-8601',
            category: 'A rejection category',
          }),
        ],
        responses: {
          200: json('AuditPage', 'Matching entries, newest first'),
          ...errors({
            400: 'BAD_REQUEST: an invalid or unknown query parameter, or `since` after `until`',
            401: ERRORS[401],
            403: 'FORBIDDEN: not an admin token',
            500: "INTERNAL: the dispatcher's Redis user may not read the audit stream (set FORGE_AUDIT_REDIS_URL)",
          }),
        },
      },
    },
    '/mcp': {
      post: {
        operationId: 'mcp',
        summary: 'MCP over Streamable HTTP, stateless: initialize, tools/list (scope-filtered, paginated), tools/call (the whole pipeline); docs/http-api.md',
        description:
          'One JSON-RPC message per request (a batch only without an `MCP-Protocol-Version` of 2025-06-18 or later); send `Accept: application/json, text/event-stream`. Requests are answered as a server-sent event stream ' +
          '(progress notifications, then the response), a plain tools/call (no progress token, no task) as one JSON body; notifications with 202. Tool failures, invalid arguments and refused approvals are results with ' +
          '`isError: true`; unknown and out-of-scope tools are JSON-RPC errors `-32602`.',
        parameters: v1,
        requestBody: { required: true, description: 'A JSON-RPC 2.0 message (MCP)', content: { 'application/json': { schema: { type: 'object' } } } },
        responses: {
          200: {
            description: 'The answer to a request: a `text/event-stream` of JSON-RPC messages, or one JSON-RPC message as JSON (a plain tools/call\'s answer, or an error)',
            content: { 'text/event-stream': { schema: { type: 'string' } }, 'application/json': { schema: { type: 'object' } } },
          },
          202: { description: 'A notification or response was accepted' },
          400: { description: 'A JSON-RPC error: the body is not JSON (-32700), not a JSON-RPC message or a batch MCP no longer allows (-32600), or a notification whose params do not fit (-32602)', content: { 'application/json': { schema: { type: 'object' } } } },
          406: { description: 'The `Accept` header does not list both `application/json` and `text/event-stream`' },
          ...errors({ 401: ERRORS[401], 413: ERRORS[413] }),
        },
      },
      get: {
        operationId: 'mcpStream',
        summary: 'Not served: the endpoint is stateless (no standalone notification stream); 405',
        security: noAuth,
        responses: { 405: { description: 'A JSON-RPC error body; `Allow: POST`', content: { 'application/json': { schema: { type: 'object' } } } } },
      },
      delete: {
        operationId: 'mcpEndSession',
        summary: 'Not served: the endpoint is stateless (no sessions to end); 405',
        security: noAuth,
        responses: { 405: { description: 'A JSON-RPC error body; `Allow: POST`', content: { 'application/json': { schema: { type: 'object' } } } } },
      },
    },
    '/v1/approvals': {
      get: {
        operationId: 'listApprovals',
        summary: 'Calls waiting for a person, oldest first (roles approver, admin)',
        parameters: [queryParameter(ApprovalListQuery, 'limit', 'Most pending calls to list (1–1000, default 100)'), ...v1],
        responses: { 200: json('ApprovalList', 'The pending calls'), ...errors({ 400: ERRORS[400], 401: ERRORS[401], 403: ERRORS[403] }) },
      },
    },
    '/v1/approvals/{id}': {
      post: {
        operationId: 'decideApproval',
        summary: 'Decide a call waiting for a person: approve, deny, or modify its arguments (roles approver, admin)',
        parameters: [param('CallId'), ...v1],
        requestBody: body('ApprovalDecisionRequest', '`arguments` goes with decision `modify`, and only with it; they are checked as a submission\'s arguments are (input limits, then the tool schema).'),
        responses: {
          200: json('CallView', 'The decision is recorded; the call as it is now (denied: `failed` with APPROVAL_DENIED).'),
          202: json('CallView', 'Approved (or modified) and `queued`.'),
          ...errors({
            400: ERRORS[400],
            401: ERRORS[401],
            403: ERRORS[403],
            404: 'CALL_NOT_FOUND (unknown id) or TOOL_NOT_FOUND (the tool left the catalog: deny the call instead)',
            409: 'NOT_AWAITING_APPROVAL (details.status): decided already, expired, or never needed approval',
            413: `${ERRORS[413]} (a \`modify\`: the call stays pending)`,
            422: 'SCHEMA_VALIDATION: the `modify` arguments do not match the tool schema (the call stays pending)',
          }),
        },
      },
    },
  };
}

/** The dispatcher's own version, from its package.json (`src/http` and `dist/http` both sit two levels below it). */
export function dispatcherVersion(): string {
  const text = readFileSync(new URL('../../package.json', import.meta.url), 'utf8');
  return z.object({ version: z.string() }).parse(JSON.parse(text)).version;
}

/**
 * The HTTP API as an OpenAPI 3.1 document, made from the zod schemas the routes
 * validate with. A unit test checks that its paths and the app's routes agree.
 */
export function buildOpenApiDocument(): OpenApiDocument {
  return {
    openapi: OPENAPI_VERSION,
    info: {
      title: 'Forge Fleet',
      version: dispatcherVersion(),
      description:
        'The Forge Fleet dispatcher HTTP API (docs/http-api.md). Every error answer is `{ error: { code, message, retryable, …details } }`. Before any route runs, every operation that takes a token may also answer 421 HOST_NOT_ALLOWED, 403 ORIGIN_NOT_ALLOWED, 401 UNAUTHENTICATED (all before the body is read), 408 REQUEST_TIMEOUT, 414 URI_TOO_LONG, 415 UNSUPPORTED_MEDIA_TYPE, 431 HEADERS_TOO_LARGE, and 503 UNAVAILABLE with `Retry-After` when the dispatcher holds too many connections (docs/http-api.md, "Connections and requests").',
    },
    security: [{ bearerAuth: [] }],
    paths: buildPaths(),
    components: {
      schemas: { ...componentSchemas(REQUEST_SCHEMAS, 'input'), ...componentSchemas(RESPONSE_SCHEMAS, 'output') },
      parameters: {
        CallId: { name: 'id', in: 'path', required: true, description: 'The call id', schema: inlineSchema(ToolCallId) },
        Wait: queryParameter(WaitQuery, 'wait', 'How long to hold the request for the result, in milliseconds'),
        ForgeTask: {
          name: 'x-forge-task',
          in: 'header',
          required: false,
          description: 'Dev mode only (FORGE_DEV_MODE=1, requests without a token): the task type whose scope applies. Ignored for token holders.',
          schema: { type: 'string' },
        },
      },
      securitySchemes: {
        bearerAuth: {
          type: 'http',
          scheme: 'bearer',
          bearerFormat: 'JWT',
          description: 'An agent capability token (EdDSA JWT, `forge token mint`) with `sub`, audience, expiry, `role` (agent, approver, admin), scope and grants.',
        },
      },
    },
  };
}

/** `GET /openapi.json`: the document, built once (no auth: it describes the API, it grants nothing). */
export function openapiRoutes(document: OpenApiDocument = buildOpenApiDocument()) {
  const text = JSON.stringify(document);
  return (app: FastifyInstance): void => {
    app.get('/openapi.json', (_request, reply) => reply.type('application/json; charset=utf-8').send(text));
  };
}
