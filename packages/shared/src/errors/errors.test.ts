import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ERROR_CODES, ERROR_TABLE, ErrorCode, httpStatusFor, isErrorCode, isRetryable } from './codes.js';
import {
  ApprovalDeadlineSource,
  BadRequestError,
  CallNotFoundError,
  ExpiredError,
  NoWorkerError,
  PayloadTooLargeError,
  UnauthenticatedError,
  WorkerLostError,
  McpServerLostError,
  IdempotencyConflictError,
  RouteNotFoundError,
  WaitTimeoutError,
  ApprovalDeniedError,
  ApprovalPendingError,
  CancelledError,
  ConfigInvalidError,
  ExecutionFailedError,
  ExecutionTimeoutError,
  InternalError,
  InvalidDefinitionError,
  InvalidTierError,
  MalformedToolBlockError,
  OutOfScopeError,
  OutputValidationError,
  RegistryError,
  SchemaValidationError,
  ToolNotFoundError,
  ForgedCallError,
  ForbiddenError,
  ResourceLimitError,
  NotAwaitingApprovalError,
  NotSpeculatableError,
  UnavailableError,
} from './errors.js';
import { type FleetError, isFleetError } from './fleet-error.js';
import { HeadersTooLargeError, HostNotAllowedError, OriginNotAllowedError, RequestTimeoutError, UnsupportedMediaTypeError, UriTooLongError } from './http-errors.js';
import { fromWireError, toWireError, WireError } from './wire.js';

const errorsDoc = (): string => readFileSync(new URL('../../../../docs/errors.md', import.meta.url), 'utf8');

/** One instance of every concrete error class, keyed by the code it must carry. */
const samples: Record<Exclude<ErrorCode, never>, FleetError> = {
  TOOL_NOT_FOUND: new ToolNotFoundError('get_weather'),
  SCHEMA_VALIDATION: new SchemaValidationError({ toolName: 'greet', issues: [{ path: '/name', reason: 'must be string', keyword: 'type' }] }),
  APPROVAL_DENIED: new ApprovalDeniedError('rm', 'not allowed'),
  APPROVAL_PENDING: new ApprovalPendingError('refund', 'over limit', 'c9'),
  EXECUTION_FAILED: new ExecutionFailedError('x', 'boom'),
  EXECUTION_TIMEOUT: new ExecutionTimeoutError('slow', 50),
  CANCELLED: new CancelledError('slow', 'caller went away'),
  OUTPUT_VALIDATION: new OutputValidationError('o', '/a', 'must be number'),
  INVALID_TIER: new InvalidTierError({ toolName: 't', expected: 'host', actual: 'platform', hint: 'fix it' }),
  REGISTRY_ERROR: new RegistryError('duplicate'),
  OUT_OF_SCOPE: new OutOfScopeError('shell', 'research'),
  INVALID_DEFINITION: new InvalidDefinitionError({ toolName: 'bad', path: '/name', reason: 'bad name' }),
  MALFORMED_TOOL_BLOCK: new MalformedToolBlockError({ line: 3, column: 1, offset: 20, reason: 'bad JSON' }),
  CONFIG_INVALID: new ConfigInvalidError('WorkerOptions', ['concurrency: must be positive']),
  INTERNAL: new InternalError('bug'),
  BAD_REQUEST: new BadRequestError('body is not JSON'),
  UNAUTHENTICATED: new UnauthenticatedError('unknown API key'),
  NO_WORKER: new NoWorkerError('http_get', '{forge.host}'),
  CALL_NOT_FOUND: new CallNotFoundError('c-1'),
  PAYLOAD_TOO_LARGE: new PayloadTooLargeError(1024),
  EXPIRED: new ExpiredError('slow', 0),
  WORKER_LOST: new WorkerLostError('pay', 'lock_expired'),
  MCP_SERVER_LOST: new McpServerLostError('files.read_file', 'files', 4242),
  ROUTE_NOT_FOUND: new RouteNotFoundError('GET', '/nope'),
  WAIT_TIMEOUT: new WaitTimeoutError('c-1', 100, 'running'),
  FORGED_CALL: new ForgedCallError('pay', 'it carries no dispatcher signature'),
  FORBIDDEN: new ForbiddenError('decide approvals', 'agent', ['approver', 'admin']),
  RESOURCE_LIMIT: new ResourceLimitError('loop', 'cpu', '2 s of CPU time'),
  NOT_AWAITING_APPROVAL: new NotAwaitingApprovalError('c-1', 'completed', 'it was decided already'),
  NOT_SPECULATABLE: new NotSpeculatableError('pay', 'it is not flagged speculatable'),
  UNAVAILABLE: new UnavailableError('connection refused'),
  IDEMPOTENCY_CONFLICT: new IdempotencyConflictError('c-1', 'arguments'),
  HOST_NOT_ALLOWED: new HostNotAllowedError('evil.example.com', 'localhost, 127.0.0.1, [::1]'),
  ORIGIN_NOT_ALLOWED: new OriginNotAllowedError('http://evil.example.com'),
  URI_TOO_LONG: new UriTooLongError(100),
  HEADERS_TOO_LARGE: new HeadersTooLargeError(16_384),
  UNSUPPORTED_MEDIA_TYPE: new UnsupportedMediaTypeError('text/csv', 'send application/json'),
  REQUEST_TIMEOUT: new RequestTimeoutError('body', 30_000),
};

describe('error codes', () => {
  it('are unique, and each key equals its value', () => {
    expect(new Set(ERROR_CODES).size).toBe(ERROR_CODES.length);
    for (const [key, value] of Object.entries(ErrorCode)) expect(key).toBe(value);
  });

  it('are each documented in docs/errors.md, and the doc names no other code', () => {
    const documented = [...errorsDoc().matchAll(/^## `([A-Z_]+)`/gm)].map((m) => m[1]);
    expect([...documented].sort()).toEqual([...ERROR_CODES].sort());
  });

  it('are each documented with the HTTP status and retryability of their table row', () => {
    const sections = [...errorsDoc().matchAll(/^## `([A-Z_]+)`\n(HTTP (\d{3}) · (not retryable|retryable))?/gm)];
    expect(sections).toHaveLength(ERROR_CODES.length);
    for (const [, code, line, status, retryable] of sections) {
      expect(line, `${code}: first line must be "HTTP <status> · retryable" or "… · not retryable"`).toBeDefined();
      expect({ code, status: Number(status), retryable: retryable === 'retryable' }).toEqual({ code, ...ERROR_TABLE[code as ErrorCode] });
    }
  });

  it('each have one table row, from which ErrorCode and ERROR_CODES derive', () => {
    expect(ERROR_CODES).toEqual(Object.keys(ERROR_TABLE));
    expect(Object.keys(ErrorCode)).toEqual(Object.keys(ERROR_TABLE));
    for (const code of ERROR_CODES) {
      const row = ERROR_TABLE[code];
      expect(Object.keys(row).sort(), code).toEqual(['retryable', 'status']);
      expect(Number.isInteger(row.status) && row.status >= 200 && row.status <= 599, `${code}: status ${row.status}`).toBe(true);
      expect(typeof row.retryable, code).toBe('boolean');
    }
  });

  it('isRetryable and httpStatusFor read the table, and refuse a value that is no code', () => {
    for (const code of ERROR_CODES) {
      expect(isRetryable(code), code).toBe(ERROR_TABLE[code].retryable);
      expect(httpStatusFor(code), code).toBe(ERROR_TABLE[code].status);
      expect(samples[code].retryable, code).toBe(ERROR_TABLE[code].retryable);
    }
    expect(() => isRetryable('NOPE' as ErrorCode)).toThrow(/unknown error code: NOPE/);
    expect(() => httpStatusFor('toString' as ErrorCode)).toThrow(/unknown error code/);
    expect(Object.isFrozen(ERROR_TABLE) && Object.isFrozen(ERROR_TABLE.TOOL_NOT_FOUND) && Object.isFrozen(ErrorCode)).toBe(true);
  });

  it('each error class carries the code it stands for', () => {
    for (const [code, error] of Object.entries(samples)) {
      expect(error.code).toBe(code);
      expect(isFleetError(error)).toBe(true);
      expect(error.name).toBe(error.constructor.name);
      expect(error.httpStatus).toBe(httpStatusFor(error.code));
    }
  });

  it('the not-found message names the tool and says it was not found', () => {
    const message = new ToolNotFoundError('get_weather').message;
    expect(message).toContain('get_weather');
    expect(message).toContain('not found');
  });

  it('messages say what failed and what to do', () => {
    expect(samples.SCHEMA_VALIDATION.message).toMatch(/greet.*'\/name'.*must be string.*fix/);
    expect(samples.APPROVAL_DENIED.message).toMatch(/rm.*denied.*not allowed/);
    expect(samples.INVALID_TIER.message).toMatch(/expected host, got platform/);
    expect(samples.OUT_OF_SCOPE.message).toMatch(/shell.*research/);
    expect(samples.EXECUTION_TIMEOUT.message).toMatch(/50 ms.*timeoutMs/);
  });

  it('retryability is decided per code', () => {
    expect(isRetryable(ErrorCode.EXECUTION_TIMEOUT)).toBe(true);
    expect(isRetryable(ErrorCode.SCHEMA_VALIDATION)).toBe(false);
    expect(samples.APPROVAL_DENIED.retryable).toBe(false);
  });

  it('the brand is recognised without instanceof (another copy of the package)', () => {
    const foreign = Object.assign(new Error('x'), { [Symbol.for('forge-fleet.FleetError')]: true, code: 'TOOL_NOT_FOUND' });
    expect(isFleetError(foreign)).toBe(true);
    expect(isFleetError(new Error('plain'))).toBe(false);
    expect(isFleetError(null)).toBe(false);
    expect(isErrorCode('TOOL_NOT_FOUND')).toBe(true);
    expect(isErrorCode('NOPE')).toBe(false);
    expect(isErrorCode('constructor')).toBe(false);
  });

  it('SCHEMA_VALIDATION lists at most the first 100 issues and counts them all (a 240 KB argument can fail 120,000 rules)', () => {
    const issues = Array.from({ length: 120_000 }, (_, i) => ({ path: `/${i}`, reason: 'must be string', keyword: 'type' }));
    const error = new SchemaValidationError({ toolName: 'greet', issues: [issues[0]!, ...issues.slice(1)] });
    expect(error.issues).toHaveLength(100);
    expect(error.issues[99]).toEqual(issues[99]);
    expect(error.details).toMatchObject({ path: '/0', issueCount: 120_000 });
    expect((error.details as { issues: unknown[] }).issues).toHaveLength(100);
    expect(error.message).toContain('(and 119999 more problem(s); details.issues lists the first 100)');
    expect(JSON.stringify(toWireError(error)).length).toBeLessThan(10_000);
    const few = new SchemaValidationError({ toolName: 'greet', issues: [issues[0]!, issues[1]!] });
    expect(few.details).toMatchObject({ issueCount: 2, issues: [issues[0], issues[1]] });
    expect(few.message).toContain('(and 1 more problem(s), see details.issues)');
  });

  it('IDEMPOTENCY_CONFLICT is a 409, not retryable, and says what to fix', () => {
    expect(httpStatusFor(ErrorCode.IDEMPOTENCY_CONFLICT)).toBe(409);
    expect(isRetryable(ErrorCode.IDEMPOTENCY_CONFLICT)).toBe(false);
    const tool = new IdempotencyConflictError('c-7', 'tool');
    expect(tool.message).toBe("call id 'c-7' was already submitted with another tool; reuse an id only to resubmit the same call, or submit with a new id");
    expect(tool.details).toEqual({ callId: 'c-7', differs: 'tool' });
    expect(new IdempotencyConflictError('c-7', 'arguments').message).toContain("call id 'c-7' was already submitted with other arguments;");
    expect(tool.httpStatus).toBe(409);
  });

  it('keeps the cause', () => {
    const cause = new Error('socket closed');
    expect(new ExecutionFailedError('x', 'io', { cause }).cause).toBe(cause);
  });
});

describe('NoWorkerError', () => {
  it('names both ways to start a worker of the tool (a tools module, or a servers file)', () => {
    const error = new NoWorkerError('files.read', '{forge.platform}');
    expect(error.message).toContain('--tools <module>');
    expect(error.message).toContain('--mcp <servers file>');
    expect(error.message).toContain('then call again');
    expect(error.details).toEqual({ toolName: 'files.read', queue: '{forge.platform}' });
  });

  it('gives the command line of the worker to start, with its tier and pool, when it knows them', () => {
    const error = new NoWorkerError('qb.hostonly', '{forge.host.p3}', { lane: { tier: 'host', pool: 'p3' } });
    expect(error.message).toContain('forge-worker --tier host --pool p3 --tools <module>');
    expect(error.message).toContain('--mcp <servers file>');
    expect(error.message).toContain("the worker's /readyz");
    expect(new NoWorkerError('files.read', '{forge.platform}', { lane: { tier: 'platform' } }).message).toContain('forge-worker --tier platform --tools <module>');
  });

  it('says a call that had run before (a retry waiting as its last worker went) may have taken effect, and counts its runs', () => {
    const error = new NoWorkerError('rp.crash', '{forge.host}', { runs: 2 });
    expect(error.message).toContain('it had already run 2 times, and whether that took effect is unknown; check before calling it again');
    expect(error.message).not.toContain('then call again');
    expect(error.details).toEqual({ toolName: 'rp.crash', queue: '{forge.host}', runs: 2 });
  });

  it('tells a call that ended without running to send it again with a new id, not to call again, and says why no worker could run it', () => {
    const error = new NoWorkerError('py.wait', '{forge.host}', { ended: true, reason: "MCP server 'py' crash-looped" });
    expect(error.message).toContain("MCP server 'py' crash-looped");
    expect(error.message).toContain('the call ended without running, and its id keeps this answer');
    expect(error.message).toContain('send the call again with a new id');
    expect(error.message).not.toContain('then call again');
    expect(error.details).toEqual({ toolName: 'py.wait', queue: '{forge.host}', reason: "MCP server 'py' crash-looped" });
  });
});

describe('WorkerLostError', () => {
  const check = 'check whether it took effect before calling it again';

  it('lock_expired: its worker stopped answering, and the tool is not retryable', () => {
    const error = new WorkerLostError('pay', 'lock_expired', { detail: 'during run 1' });
    expect(error.message).toBe(`the worker running tool 'pay' stopped answering and the call's lock expired (during run 1); the tool is not flagged retryable, so the call was not run again — ${check}`);
    expect(error.reason).toBe('lock_expired');
    expect(error.details).toEqual({ toolName: 'pay', reason: 'lock_expired', detail: 'during run 1' });
  });

  it('shutdown: its worker shut down before the call finished', () => {
    const error = new WorkerLostError('pay', 'shutdown');
    expect(error.message).toBe(`the worker running tool 'pay' shut down before the call finished; the tool is not flagged retryable, so the call was not run again — ${check}`);
    expect(error.details).toEqual({ toolName: 'pay', reason: 'shutdown' });
  });

  it('retries_exhausted: counts the runs, names the limit, and does not call the tool non-retryable', () => {
    const error = new WorkerLostError('pay', 'retries_exhausted', { attempts: 3, detail: 'lock expired' });
    expect(error.message).toBe(
      `the call to tool 'pay' was lost with its worker on its last run (lock expired); it has been run 3 times, as many as the retry limit FORGE_RETRY_ATTEMPTS allows, so it was not run again — ${check}, or raise FORGE_RETRY_ATTEMPTS`,
    );
    expect(error.message).not.toMatch(/not flagged retryable/);
    expect(error.details).toEqual({ toolName: 'pay', reason: 'retries_exhausted', attempts: 3, detail: 'lock expired' });
    expect(new WorkerLostError('pay', 'retries_exhausted', { attempts: 1 }).message).toContain('run 1 time, as many as');
  });

  it('the reason survives the wire', () => {
    const back = fromWireError(toWireError(new WorkerLostError('pay', 'shutdown')));
    expect(back).toMatchObject({ code: 'WORKER_LOST', details: { reason: 'shutdown' } });
  });

  it('still takes the deprecated free-text reason, without claiming why the call was not run again', () => {
    const error = new WorkerLostError('pay', 'the worker shut down');
    expect(error.message).toBe(`the worker running tool 'pay' was lost (the worker shut down) and the call was not run again; ${check}`);
    expect(error.reason).toBeUndefined();
    expect(error.details).toEqual({ toolName: 'pay', reason: 'the worker shut down' });
  });
});

describe('wire errors', () => {
  it('FleetErrors keep code, message, retryability and details', () => {
    const wire = toWireError(samples.SCHEMA_VALIDATION);
    expect(wire).toMatchObject({ code: 'SCHEMA_VALIDATION', retryable: false, details: { toolName: 'greet', path: '/name', reason: 'must be string' } });
    expect(WireError.parse(JSON.parse(JSON.stringify(wire)))).toEqual(wire);
  });

  it('plain errors and thrown non-errors become INTERNAL with their message', () => {
    expect(toWireError(new TypeError('x is undefined'))).toEqual({ code: 'INTERNAL', message: 'x is undefined', retryable: true, details: {} });
    expect(toWireError('just a string').message).toContain('just a string');
    expect(toWireError({ weird: 1 }).message).toContain('{"weird":1}');
  });

  it('round-trips to a typed error on the other side', () => {
    const back = fromWireError(toWireError(samples.OUT_OF_SCOPE));
    expect(isFleetError(back)).toBe(true);
    expect(back.code).toBe('OUT_OF_SCOPE');
    expect(back.message).toBe(samples.OUT_OF_SCOPE.message);
    expect(back.details).toEqual(samples.OUT_OF_SCOPE.details);
  });

  it('an unknown code from a newer peer becomes INTERNAL and keeps the original code', () => {
    const back = fromWireError({ code: 'FUTURE_CODE', message: 'm', retryable: false, details: {} });
    expect(back.code).toBe('INTERNAL');
    expect(back.details.originalCode).toBe('FUTURE_CODE');
  });
});

describe('ExpiredError', () => {
  it('says what the call waited for: a worker (queue deadline) or a person (approval deadline)', () => {
    const worker = new ExpiredError('refund', 0);
    expect(worker.message).toMatch(/before a worker started it/);
    const person = new ExpiredError('refund', 0, 'person');
    expect(person.message).toMatch(/waiting for a person to approve it/);
    expect(person.message).not.toMatch(/add workers/);
    expect(person.details).toMatchObject({ waiting: 'person' });
  });

  it("names where a person's deadline came from and the setting that gives a longer one", () => {
    const expired = (deadlineFrom?: ApprovalDeadlineSource) => new ExpiredError('fs.write_file', 0, 'person', deadlineFrom);
    const head = "call to tool 'fs.write_file' expired at 1970-01-01T00:00:00.000Z waiting for a person to approve it, and was not executed; decide sooner (an approver token: forge approvals), or";

    const policy = expired({ from: 'policy', entry: 'fs.*' });
    expect(policy.message).toBe(`${head} raise the deadline the policy file gives it: its approval.deadlines entry 'fs.*' set this one`);
    expect(policy.details).toEqual({ toolName: 'fs.write_file', deadline: 0, waiting: 'person', deadlineFrom: 'policy', policyEntry: 'fs.*' });

    // The QA case: the deadline came from the MCP servers file, where the policy names none for the tool.
    const tool = expired({ from: 'tool' });
    expect(tool.message).toBe(
      `${head} raise the tool's own approvalDeadlineMs, which set this one (its definition's, or for an MCP server's tool tools.<name>.approvalDeadlineMs in the servers file); an approval.deadlines entry for the tool in the policy file would win over it`,
    );
    expect(tool.details).toEqual({ toolName: 'fs.write_file', deadline: 0, waiting: 'person', deadlineFrom: 'tool' });

    const fallback = expired({ from: 'default' });
    expect(fallback.message).toBe(
      `${head} give it a longer deadline: the tool has none of its own, so the default applied (approval.deadlineMs in the policy file, or FORGE_APPROVAL_DEADLINE_MS without one); one for the tool alone goes in the policy file's approval.deadlines, or in its definition's approvalDeadlineMs (for an MCP server's tool tools.<name>.approvalDeadlineMs in the servers file)`,
    );
    expect(fallback.details).toMatchObject({ deadlineFrom: 'default' });

    // A call recorded by a dispatcher that did not say where its deadline came from: every place is named.
    const unknown = expired();
    expect(unknown.message).toBe(
      `${head} give it a longer deadline: the policy file's approval.deadlines, the tool's own approvalDeadlineMs (for an MCP server's tool tools.<name>.approvalDeadlineMs in the servers file), or the default (approval.deadlineMs in the policy file, or FORGE_APPROVAL_DEADLINE_MS without one)`,
    );
    expect(unknown.details).toEqual({ toolName: 'fs.write_file', deadline: 0, waiting: 'person' });

    for (const error of [policy, tool, fallback, unknown]) expect(error.message).not.toMatch(/approval deadline in the policy$/);
    // A queue deadline is the caller's own expireAfterMs: nothing of the approval deadline's is said.
    expect(new ExpiredError('fs.write_file', 0, 'worker', { from: 'tool' }).message).not.toMatch(/approvalDeadlineMs/);
  });

  it('reads a deadline source from a record, and leaves out what it does not know', () => {
    expect(ApprovalDeadlineSource.parse({ from: 'policy', entry: 'refund' })).toEqual({ from: 'policy', entry: 'refund' });
    expect(ApprovalDeadlineSource.safeParse({ from: 'somewhere-new' }).success).toBe(false);
    expect(ApprovalDeadlineSource.safeParse({ from: 'policy' }).success).toBe(false);
  });
});
