import { describe, expect, it } from 'vitest';
import { AutoApprove, TrustGate } from '../approval/handlers.js';
import { MemoryAuditLogger } from '../scope/audit.js';
import { MemoryRiskSignalQueue } from '../scope/risk.js';
import { ToolScope } from '../scope/tool-scope.js';
import type { ToolContext } from '../tools/executor.js';
import { ToolRegistry } from '../tools/registry.js';
import { defineTool } from '../tools/tool.js';
import { ScopedToolExecutor } from './scoped-executor.js';

function setup() {
  const ran: string[] = [];
  const contexts: ToolContext[] = [];
  const tool = (name: string, extra: Partial<Parameters<typeof defineTool>[0]> = {}) =>
    defineTool({
      name,
      tier: 'platform',
      ...extra,
      handler: (args, ctx) => {
        ran.push(name);
        contexts.push(ctx);
        return `${name}:${JSON.stringify(args)}`;
      },
    });
  const registry = new ToolRegistry().registerAll([
    tool('search.web', { speculatable: true }),
    tool('search.docs', { retryable: true }),
    tool('shell'),
    tool('payments.refund', { tier: 'host', requiresConfirmation: true }),
  ]);
  const audit = new MemoryAuditLogger();
  const risk = new MemoryRiskSignalQueue();
  const executor = new ScopedToolExecutor({ registry, approval: new AutoApprove(), parse: { newId: (i) => `t${i}` } }).withAudit(audit).withSignalQueue(risk);
  executor.registerScope('research', ToolScope.allow(['search.*'])).registerScope('ops', ToolScope.allow(['shell', 'payments.refund']));
  return { executor, ran, contexts, audit, risk };
}

describe('ScopedToolExecutor', () => {
  it('the full scope admits everything', async () => {
    const { executor } = setup();
    expect(ToolScope.full().isFull).toBe(true);
    expect(executor.toolDefinitions().map((d) => d.name)).toEqual(['payments.refund', 'search.docs', 'search.web', 'shell']);
    expect((await executor.executeToolCall({ id: 'c', name: 'shell', arguments: {} })).status).toBe('completed');
  });

  it('scopeForTask is undefined for an unregistered task type and lists admitted tools otherwise', () => {
    const { executor } = setup();
    expect(executor.scopeForTask('unknown')).toBeUndefined();
    expect(executor.scopeForTask('research')).toEqual(['search.docs', 'search.web']);
  });

  it('switching scope by task type returns false for an unknown type and keeps the active scope', () => {
    const { executor } = setup();
    expect(executor.setScopeForTask('research')).toBe(true);
    expect(executor.activeScopeName).toBe('research');
    expect(executor.setScopeForTask('nope')).toBe(false);
    expect(executor.activeScopeName).toBe('research');
  });

  it('filters the listing by the active scope and remembers the scope it listed under', () => {
    const { executor } = setup();
    expect(executor.scopeAtListingName).toBeNull();
    executor.setScopeForTask('research');
    expect(executor.toolDefinitions().map((d) => d.name)).toEqual(['search.docs', 'search.web']);
    expect(executor.scopeAtListingName).toBe('research');
    executor.setScopeForTask('ops');
    expect(executor.scopeAtListingName).toBe('research');
  });

  it('rejects an out-of-scope call before it runs, with an audit entry naming both scopes and a risk signal', async () => {
    const { executor, ran, audit, risk } = setup();
    executor.setScopeForTask('research');
    executor.toolDefinitions();
    executor.setScopeForTask('ops');
    await expect(executor.executeToolCall({ id: 'x1', name: 'search.web', arguments: {} })).rejects.toMatchObject({ code: 'OUT_OF_SCOPE' });
    expect(ran).toEqual([]);
    expect(audit.entries).toEqual([expect.objectContaining({ callId: 'x1', tool: 'search.web', errorCategory: 'out_of_scope', scopeAtListing: 'research', scopeAtDispatch: 'ops' })]);
    expect(risk.signals).toHaveLength(1);
  });

  it('setScope replaces the active scope directly', async () => {
    const { executor } = setup();
    executor.setScope(ToolScope.allow(['shell']), 'shell-only');
    expect(executor.activeScopeName).toBe('shell-only');
    await expect(executor.executeToolCall({ id: 'c', name: 'search.web', arguments: {} })).rejects.toMatchObject({ code: 'OUT_OF_SCOPE', details: { scope: 'shell-only' } });
  });

  it('answers per-tool retryable, speculatable and confirmation flags', () => {
    const { executor } = setup();
    expect(executor.isToolRetryable('search.docs')).toBe(true);
    expect(executor.isToolRetryable('search.web')).toBe(false);
    expect(executor.isToolSpeculatable('search.web')).toBe(true);
    expect(executor.isToolSpeculatable('unknown')).toBe(false);
    expect(executor.requiresConfirmation({ id: 'c', name: 'payments.refund', arguments: {} })).toBe(true);
    expect(executor.requiresConfirmation({ id: 'c', name: 'shell', arguments: {} })).toBe(false);
  });

  it('holds a call that needs confirmation and runs it once confirmed', async () => {
    const { executor, ran } = setup();
    const call = { id: 'r1', name: 'payments.refund', arguments: { amount: 5 } };
    expect((await executor.executeToolCall(call)).status).toBe('awaiting_approval');
    expect(ran).toEqual([]);
    expect((await executor.executeToolCallConfirmed(call)).status).toBe('completed');
    expect(ran).toEqual(['payments.refund']);
  });

  it('a confirmed call is still held to the scope', async () => {
    const { executor, ran } = setup();
    executor.setScopeForTask('research');
    await expect(executor.executeToolCallConfirmed({ id: 'r1', name: 'payments.refund', arguments: {} })).rejects.toMatchObject({ code: 'OUT_OF_SCOPE' });
    expect(ran).toEqual([]);
  });

  it('runs the tool blocks of a model response, reporting each call and malformed block', async () => {
    const { executor } = setup();
    executor.setScopeForTask('research');
    const text = ['I will search.', '```tool_call', '{"name": "search.web", "arguments": {"q": "x"}}', '```', '```tool_call', '{"name": "shell"}', '```', '```tool_call', 'oops', '```'].join('\n');
    const outcome = await executor.execute(text);
    expect(outcome.calls).toHaveLength(2);
    const [first, second] = outcome.calls;
    expect(first?.ok && first.outcome.status === 'completed' && first.outcome.result.content).toBe('search.web:{"q":"x"}');
    expect(second?.ok === false && second.error.code).toBe('OUT_OF_SCOPE');
    expect(outcome.errors.map((e) => e.details.line)).toEqual([8]);
  });

  it('executeConfirmed runs held calls from a model response', async () => {
    const { executor, ran } = setup();
    const text = '```tool_call\n{"name": "payments.refund", "arguments": {"amount": 1}}\n```';
    const held = await executor.execute(text);
    expect(held.calls[0]?.ok && held.calls[0].outcome.status).toBe('awaiting_approval');
    const done = await executor.executeConfirmed(text);
    expect(done.calls[0]?.ok && done.calls[0].outcome.status).toBe('completed');
    expect(ran).toEqual(['payments.refund']);
  });

  it('passes the skill environment and trust level to handlers', async () => {
    const { executor, contexts } = setup();
    executor.setSkillEnv({ API_BASE: 'https://example.test' });
    executor.setEffectiveTrust('verified');
    await executor.executeToolCall({ id: 'c', name: 'shell', arguments: {} });
    expect(contexts[0]).toMatchObject({ env: { API_BASE: 'https://example.test' }, trust: 'verified' });
    executor.setSkillEnv(undefined);
    await executor.executeToolCall({ id: 'c2', name: 'shell', arguments: {} });
    expect(contexts[1]?.env).toEqual({});
  });

  it('a quarantined skill cannot run host tools when the approval step applies trust', async () => {
    const registry = new ToolRegistry().register(defineTool({ name: 'http_get', tier: 'host', handler: () => 'ok' }));
    const executor = new ScopedToolExecutor({ registry, approval: new TrustGate() });
    executor.setEffectiveTrust('quarantined');
    expect(executor.effectiveTrust).toBe('quarantined');
    await expect(executor.executeToolCall({ id: 'c', name: 'http_get', arguments: {} })).rejects.toMatchObject({ code: 'APPROVAL_DENIED' });
  });
});
