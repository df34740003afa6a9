import { describe, expect, it } from 'vitest';
import type { ToolCall } from '../tools/call.js';
import { defineTool } from '../tools/tool.js';
import type { Tier } from '../tiers/tier.js';
import { Approval, type ApprovalContext, type ApprovalDecision, ApprovalDecision as ApprovalDecisionSchema, type ApprovalHandler, authorizationAllows } from './decision.js';
import { AllowList, allOf, AutoApprove, DenyAll, TierBasedApproval, TrustGate } from './handlers.js';

const call = (name: string, args: Record<string, unknown> = {}): ToolCall => ({ id: 'c1', name, arguments: args });
const ctxFor = (name: string, extra: Partial<ApprovalContext> = {}): ApprovalContext => ({ definition: defineTool({ name }).definition, trust: 'trusted', ...extra });

describe('built-in approval handlers', () => {
  it('AutoApprove approves anything, host tier included', async () => {
    expect(new AutoApprove().check()).toEqual({ kind: 'approve' });
    const handler: ApprovalHandler = new AutoApprove();
    expect(await handler.check(call('dangerous_tool'), 'host', ctxFor('dangerous_tool'))).toEqual({ kind: 'approve' });
  });

  it('DenyAll denies with its configured reason', async () => {
    const handler: ApprovalHandler = new DenyAll('system under maintenance');
    const decision = await handler.check(call('any_tool'), 'platform', ctxFor('any_tool'));
    expect(decision.kind).toBe('deny');
    expect(decision.kind === 'deny' && decision.reason).toContain('maintenance');
  });

  it('DenyAll keeps the reason it was built with', () => {
    expect(new DenyAll('no tools allowed').reason).toBe('no tools allowed');
  });

  it('TierBasedApproval approves platform, denies host without authorization, approves embedded', () => {
    const handler = new TierBasedApproval();
    const c = call('clock');
    expect(handler.check(c, 'platform', ctxFor('clock'))).toEqual({ kind: 'approve' });
    const host = handler.check(c, 'host', ctxFor('clock'));
    expect(host.kind).toBe('deny');
    expect(host.kind === 'deny' && host.reason).toContain('authorization');
    expect(handler.check(c, 'embedded', ctxFor('clock'))).toEqual({ kind: 'approve' });
  });

  it('TierBasedApproval approves a host tool when the authorization grants it, exactly or by prefix', () => {
    const handler = new TierBasedApproval();
    const authorization = { subject: 'agent-7', tools: ['http_get', 'db.*'] };
    expect(handler.check(call('http_get'), 'host', ctxFor('http_get', { authorization }))).toEqual({ kind: 'approve' });
    expect(handler.check(call('db.query'), 'host', ctxFor('db.query', { authorization }))).toEqual({ kind: 'approve' });
    const other = handler.check(call('shell'), 'host', ctxFor('shell', { authorization }));
    expect(other.kind === 'deny' && other.reason).toContain('agent-7');
  });

  it('AllowList approves listed tools and denies the rest, naming the tool', () => {
    const handler = new AllowList(['clock', 'fs.*']);
    expect(handler.check(call('clock'))).toEqual({ kind: 'approve' });
    expect(handler.check(call('fs.read'))).toEqual({ kind: 'approve' });
    expect(handler.check(call('rm'))).toEqual({ kind: 'deny', reason: "tool 'rm' is not in the allow list" });
  });

  it('a custom handler can be written as a plain object', async () => {
    const allowed = ['clock'];
    const custom: ApprovalHandler = {
      check: (c) => (allowed.includes(c.name) ? Approval.approve() : Approval.deny(`tool '${c.name}' not in allow list`)),
    };
    expect(await custom.check(call('clock'), 'platform', ctxFor('clock'))).toEqual({ kind: 'approve' });
    expect(await custom.check(call('x'), 'platform', ctxFor('x'))).toEqual({ kind: 'deny', reason: "tool 'x' not in allow list" });
  });

  it('TrustGate denies everything for blocked skills and host tools for quarantined ones', () => {
    const gate = new TrustGate();
    const run = (tier: Tier, trust: ApprovalContext['trust']): string => gate.check(call('t'), tier, ctxFor('t', { trust })).kind;
    expect(run('platform', 'trusted')).toBe('approve');
    expect(run('host', 'verified')).toBe('approve');
    expect(run('platform', 'quarantined')).toBe('approve');
    expect(run('host', 'quarantined')).toBe('deny');
    expect(run('embedded', 'blocked')).toBe('deny');
  });

  it('authorization patterns are checked like scope patterns', () => {
    expect(authorizationAllows({ subject: 's', tools: ['*'] }, 'anything')).toBe(true);
    expect(authorizationAllows({ subject: 's', tools: [] }, 'anything')).toBe(false);
    expect(() => authorizationAllows({ subject: 's', tools: ['a*b'] }, 'x')).toThrow(/not an exact tool name/);
  });

  it('decisions have a wire schema', () => {
    expect(ApprovalDecisionSchema.parse({ kind: 'modify', arguments: { a: 1 } })).toEqual({ kind: 'modify', arguments: { a: 1 } });
    expect(ApprovalDecisionSchema.safeParse({ kind: 'deny' }).success).toBe(false);
  });
});

describe('allOf', () => {
  const record = (log: string[], name: string, decision: ApprovalDecision): ApprovalHandler => ({
    check: (c) => {
      log.push(`${name}:${JSON.stringify(c.arguments)}`);
      return decision;
    },
  });

  it('approves only when every handler approves', async () => {
    expect(await allOf(new AutoApprove(), new AutoApprove()).check(call('a'), 'platform', ctxFor('a'))).toEqual({ kind: 'approve' });
  });

  it('stops at the first denial', async () => {
    const log: string[] = [];
    const decision = await allOf(record(log, 'one', Approval.approve()), record(log, 'two', Approval.deny('no')), record(log, 'three', Approval.deny('later'))).check(call('a'), 'platform', ctxFor('a'));
    expect(decision).toEqual({ kind: 'deny', reason: 'no' });
    expect(log).toEqual(['one:{}', 'two:{}']);
  });

  it('passes a modification on to later handlers and returns it', async () => {
    const log: string[] = [];
    const decision = await allOf(record(log, 'mod', Approval.modify({ limit: 10 })), record(log, 'see', Approval.approve())).check(call('a', { limit: 1000 }), 'platform', ctxFor('a'));
    expect(decision).toEqual({ kind: 'modify', arguments: { limit: 10 } });
    expect(log).toEqual(['mod:{"limit":1000}', 'see:{"limit":10}']);
  });

  it('waits for a person when one asks and none denies, keeping modified arguments', async () => {
    const decision = await allOf(new AutoApprove(), { check: () => Approval.modify({ q: 'safe' }) }, { check: () => Approval.pending('large refund') }).check(call('a'), 'host', ctxFor('a'));
    expect(decision).toEqual({ kind: 'pending', reason: 'large refund', arguments: { q: 'safe' } });
    const denied = await allOf({ check: () => Approval.pending('p') }, new DenyAll('d')).check(call('a'), 'host', ctxFor('a'));
    expect(denied).toEqual({ kind: 'deny', reason: 'd' });
  });
});
