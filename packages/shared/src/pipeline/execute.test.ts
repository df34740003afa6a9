import { describe, expect, it } from 'vitest';
import { Approval, type ApprovalHandler } from '../approval/decision.js';
import { AutoApprove, DenyAll, TierBasedApproval } from '../approval/handlers.js';
import { ErrorCode } from '../errors/codes.js';
import { isFleetError } from '../errors/fleet-error.js';
import { type AuditLogger, MemoryAuditLogger } from '../scope/audit.js';
import { MemoryRiskSignalQueue } from '../scope/risk.js';
import { ToolScope } from '../scope/tool-scope.js';
import type { ToolCall } from '../tools/call.js';
import type { ToolContext } from '../tools/executor.js';
import { ToolRegistry } from '../tools/registry.js';
import { defineTool, ToolBuilder } from '../tools/tool.js';
import { executeToolCall, type PipelineOptions, resultOf } from './execute.js';

const greetSchema = { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] };

/** A registry whose tools count their executions, so tests can prove what did not run. */
function fixture() {
  const runs: Record<string, ToolCall[]> = {};
  const contexts: ToolContext[] = [];
  const track = (name: string, out: (args: Record<string, unknown>, ctx: ToolContext) => unknown, requiresConfirmation = false) =>
    defineTool({
      name,
      tier: 'platform',
      parameters: greetSchema,
      requiresConfirmation,
      handler: (args, ctx) => {
        (runs[name] ??= []).push(ctx.call);
        contexts.push(ctx);
        return out(args, ctx) as string;
      },
    });
  const registry = new ToolRegistry()
    .register(track('greet', (args) => `Hello, ${String(args.name)}!`))
    .register(track('confirm_me', () => 'done', true))
    .register(defineTool({ name: 'wire_money', tier: 'host', handler: () => 'sent' }))
    .freeze();
  return { registry, runs, contexts };
}

async function rejection(promise: Promise<unknown>): Promise<{ code: string; message: string; details: Record<string, unknown> }> {
  try {
    await promise;
  } catch (error) {
    if (isFleetError(error)) return { code: error.code, message: error.message, details: { ...error.details } };
    throw error;
  }
  throw new Error('expected the pipeline to reject');
}

describe('executeToolCall', () => {
  it('validates, approves and executes (the greet example)', async () => {
    const { registry } = fixture();
    const outcome = await executeToolCall({ id: 'call-1', name: 'greet', arguments: { name: 'Alice' } }, { registry, approval: new AutoApprove() });
    expect(outcome).toEqual({ status: 'completed', result: { toolCallId: 'call-1', name: 'greet', content: 'Hello, Alice!', isError: false } });
  });

  it('registers, looks up and executes (the get_time example)', async () => {
    const tool = new ToolBuilder('get_time').description('Get the current UTC time').tier('platform').handler(() => '2026-02-18T00:00:00Z').build();
    const registry = new ToolRegistry().register(tool);
    const result = resultOf(await executeToolCall({ id: 'call-1', name: 'get_time', arguments: {} }, { registry, approval: new AutoApprove() }));
    expect(result.content).toBe('2026-02-18T00:00:00Z');
  });

  it('rejects an unknown tool with TOOL_NOT_FOUND', async () => {
    const { registry } = fixture();
    const error = await rejection(executeToolCall({ id: 'c', name: 'nope', arguments: {} }, { registry, approval: new AutoApprove() }));
    expect(error.code).toBe(ErrorCode.TOOL_NOT_FOUND);
  });

  it('rejects bad arguments with the path and reason, and never executes', async () => {
    const { registry, runs } = fixture();
    const error = await rejection(executeToolCall({ id: 'c', name: 'greet', arguments: { name: 42 } }, { registry, approval: new AutoApprove() }));
    expect(error.code).toBe(ErrorCode.SCHEMA_VALIDATION);
    expect(error.details).toMatchObject({ path: '/name', reason: 'must be string', stage: 'arguments' });
    expect(error.message).toContain("'greet'");
    expect(runs.greet).toBeUndefined();
  });

  it('points at a missing required field by its own path', async () => {
    const { registry } = fixture();
    const error = await rejection(executeToolCall({ id: 'c', name: 'greet', arguments: {} }, { registry, approval: new AutoApprove() }));
    expect(error.details.path).toBe('/name');
  });

  it('rejects arguments that are not a JSON object the same way', async () => {
    const { registry } = fixture();
    for (const bad of [[1, 2], 'x', null, 3]) {
      const error = await rejection(executeToolCall({ id: 'c', name: 'greet', arguments: bad as never }, { registry, approval: new AutoApprove() }));
      expect(error.code).toBe(ErrorCode.SCHEMA_VALIDATION);
      expect(error.details.path).toBe('');
      expect(error.details.reason).toMatch(/must be a JSON object/);
    }
  });

  it('runs the approval step after validation: invalid calls never reach it', async () => {
    const { registry } = fixture();
    let asked = 0;
    const approval: ApprovalHandler = { check: () => (asked++, Approval.approve()) };
    await rejection(executeToolCall({ id: 'c', name: 'greet', arguments: {} }, { registry, approval }));
    expect(asked).toBe(0);
  });

  it('a denial becomes APPROVAL_DENIED with the reason, and nothing runs', async () => {
    const { registry, runs } = fixture();
    const error = await rejection(executeToolCall({ id: 'c', name: 'greet', arguments: { name: 'a' } }, { registry, approval: new DenyAll('system under maintenance') }));
    expect(error.code).toBe(ErrorCode.APPROVAL_DENIED);
    expect(error.details.reason).toBe('system under maintenance');
    expect(runs.greet).toBeUndefined();
  });

  it('host tools need an authorization under TierBasedApproval', async () => {
    const { registry } = fixture();
    const call = { id: 'c', name: 'wire_money', arguments: {} };
    const denied = await rejection(executeToolCall(call, { registry, approval: new TierBasedApproval() }));
    expect(denied.code).toBe(ErrorCode.APPROVAL_DENIED);
    const ok = await executeToolCall(call, { registry, approval: new TierBasedApproval(), ctx: { authorization: { subject: 'ops', tools: ['wire_money'] } } });
    expect(ok.status).toBe('completed');
  });

  it('runs a modified call with the new arguments', async () => {
    const { registry, runs } = fixture();
    const approval: ApprovalHandler = { check: () => Approval.modify({ name: 'Redacted' }) };
    const outcome = await executeToolCall({ id: 'c', name: 'greet', arguments: { name: 'Alice' } }, { registry, approval });
    expect(resultOf(outcome).content).toBe('Hello, Redacted!');
    expect(runs.greet?.[0]?.arguments).toEqual({ name: 'Redacted' });
  });

  it('validates modified arguments again and refuses invalid ones before execution', async () => {
    const { registry, runs } = fixture();
    const approval: ApprovalHandler = { check: () => Approval.modify({ name: 7 }) };
    const error = await rejection(executeToolCall({ id: 'c', name: 'greet', arguments: { name: 'Alice' } }, { registry, approval }));
    expect(error.code).toBe(ErrorCode.SCHEMA_VALIDATION);
    expect(error.details.stage).toBe('after_modify');
    expect(error.message).toContain('after the approval step modified them');
    expect(runs.greet).toBeUndefined();
  });

  it('an approval handler that throws denies (fails closed)', async () => {
    const { registry, runs } = fixture();
    const approval: ApprovalHandler = {
      check: () => {
        throw new Error('policy service down');
      },
    };
    const error = await rejection(executeToolCall({ id: 'c', name: 'greet', arguments: { name: 'a' } }, { registry, approval }));
    expect(error.code).toBe(ErrorCode.APPROVAL_DENIED);
    expect(error.message).toContain('policy service down');
    expect(runs.greet).toBeUndefined();
  });

  it('pending approval waits for a person; confirmed, it runs', async () => {
    const { registry, runs } = fixture();
    const approval: ApprovalHandler = { check: () => Approval.pending('a person must look at this') };
    const call = { id: 'c', name: 'greet', arguments: { name: 'Bo' } };
    const waiting = await executeToolCall(call, { registry, approval });
    expect(waiting).toEqual({ status: 'awaiting_approval', call, reason: 'a person must look at this', waitingFor: 'approval' });
    expect(runs.greet).toBeUndefined();
    expect(() => resultOf(waiting)).toThrow(expect.objectContaining({ code: ErrorCode.APPROVAL_PENDING }) as Error);
    const done = await executeToolCall(call, { registry, approval, confirmed: true });
    expect(resultOf(done).content).toBe('Hello, Bo!');
  });

  it('tools that require confirmation wait, and run once confirmed (still checking schema)', async () => {
    const { registry, runs } = fixture();
    const call = { id: 'c', name: 'confirm_me', arguments: { name: 'x' } };
    const waiting = await executeToolCall(call, { registry, approval: new AutoApprove() });
    expect(waiting.status).toBe('awaiting_approval');
    expect(waiting.status === 'awaiting_approval' && waiting.waitingFor).toBe('confirmation');
    expect(runs.confirm_me).toBeUndefined();
    const invalid = await rejection(executeToolCall({ ...call, arguments: {} }, { registry, approval: new AutoApprove(), confirmed: true }));
    expect(invalid.code).toBe(ErrorCode.SCHEMA_VALIDATION);
    const done = await executeToolCall(call, { registry, approval: new AutoApprove(), confirmed: true });
    expect(done.status).toBe('completed');
    expect(runs.confirm_me).toHaveLength(1);
  });

  it('a confirmed call is still denied when the approval step denies it', async () => {
    const { registry, runs } = fixture();
    const error = await rejection(executeToolCall({ id: 'c', name: 'confirm_me', arguments: { name: 'x' } }, { registry, approval: new DenyAll('no'), confirmed: true }));
    expect(error.code).toBe(ErrorCode.APPROVAL_DENIED);
    expect(runs.confirm_me).toBeUndefined();
  });

  it('a handler that throws yields an error result, not a rejection', async () => {
    const registry = new ToolRegistry().register(
      defineTool({
        name: 'boom',
        tier: 'platform',
        handler: () => {
          throw new Error('disk full');
        },
      }),
    );
    const outcome = await executeToolCall({ id: 'c', name: 'boom', arguments: {} }, { registry, approval: new AutoApprove() });
    expect(outcome.status).toBe('failed');
    const result = resultOf(outcome);
    expect(result.isError).toBe(true);
    expect(result.content).toContain('disk full');
    expect(result.error).toMatchObject({ code: 'EXECUTION_FAILED', retryable: true });
  });

  it('passes the caller context (attempt, env, trust, call) to the handler', async () => {
    const { registry, contexts } = fixture();
    await executeToolCall({ id: 'c', name: 'greet', arguments: { name: 'a' } }, { registry, approval: new AutoApprove(), ctx: { attempt: 2, env: { REGION: 'eu' }, trust: 'verified' } });
    expect(contexts[0]).toMatchObject({ attempt: 2, env: { REGION: 'eu' }, trust: 'verified', tier: 'platform', call: { id: 'c' } });
  });
});

describe('scope enforcement in the pipeline', () => {
  it('rejects out-of-scope calls before lookup, validation, approval or execution, and audits them', async () => {
    const { registry, runs } = fixture();
    const audit = new MemoryAuditLogger();
    const risk = new MemoryRiskSignalQueue();
    let asked = 0;
    const options: PipelineOptions = {
      registry,
      approval: { check: () => (asked++, Approval.approve()) },
      scope: { name: 'research', scope: ToolScope.allow(['search.*']) },
      scopeAtListing: 'research',
      audit,
      risk,
      ctx: { caller: 'agent-1' },
    };
    // Invalid arguments and an unknown tool: the scope check still answers first.
    for (const call of [
      { id: 'c1', name: 'greet', arguments: { name: 5 } },
      { id: 'c2', name: 'does_not_exist', arguments: {} },
    ]) {
      const error = await rejection(executeToolCall(call, options));
      expect(error.code).toBe(ErrorCode.OUT_OF_SCOPE);
      expect(error.details.scope).toBe('research');
    }
    expect(asked).toBe(0);
    expect(runs).toEqual({});
    expect(audit.entries).toHaveLength(2);
    expect(audit.entries[0]).toMatchObject({ callId: 'c1', tool: 'greet', errorCategory: 'out_of_scope', scopeAtListing: 'research', scopeAtDispatch: 'research', caller: 'agent-1' });
    expect(risk.signals.map((s) => [s.kind, s.tool, s.scope])).toEqual([
      ['out_of_scope', 'greet', 'research'],
      ['out_of_scope', 'does_not_exist', 'research'],
    ]);
  });

  it('a failing audit sink does not turn the rejection into anything else', async () => {
    const { registry } = fixture();
    const audit: AuditLogger = {
      record: () => Promise.reject(new Error('audit store down')),
    };
    const error = await rejection(executeToolCall({ id: 'c', name: 'greet', arguments: { name: 'a' } }, { registry, approval: new AutoApprove(), scope: { name: 'none', scope: ToolScope.allow([]) }, audit }));
    expect(error.code).toBe(ErrorCode.OUT_OF_SCOPE);
  });

  it('in-scope calls run and leave no audit entry', async () => {
    const { registry } = fixture();
    const audit = new MemoryAuditLogger();
    const outcome = await executeToolCall({ id: 'c', name: 'greet', arguments: { name: 'a' } }, { registry, approval: new AutoApprove(), scope: { name: 'g', scope: ToolScope.allow(['greet']) }, audit });
    expect(outcome.status).toBe('completed');
    expect(audit.entries).toEqual([]);
  });
});
