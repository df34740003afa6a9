import { MemoryAuditLogger } from '@forge-fleet/shared';
import { describe, expect, it } from 'vitest';
import { FleetMetrics, outcomeOf } from './fleet-metrics.js';
import { MeteredAuditLogger } from './metered-audit.js';

describe('outcomeOf', () => {
  it.each([
    [{ callId: 'c', decision: 'completed' }, 'completed'],
    [{ callId: 'c', decision: 'failed', code: 'EXECUTION_FAILED' }, 'failed'],
    [{ callId: 'c', decision: 'failed', code: 'EXPIRED' }, 'expired'],
    [{ callId: 'c', decision: 'failed', code: 'APPROVAL_DENIED' }, 'denied'],
    [{ callId: 'c', decision: 'failed', code: 'FORGED_CALL' }, undefined],
    [{ callId: 'c', decision: 'cancelled' }, 'cancelled'],
    [{ callId: 'c', decision: 'rejected', category: 'out_of_scope' }, 'out_of_scope'],
    [{ callId: 'c', decision: 'rejected', category: 'denied' }, 'denied'],
    [{ callId: 'c', decision: 'rejected', category: 'schema' }, 'rejected'],
    [{ callId: 'c', errorCategory: 'forged_call' }, 'forged'],
    [{ callId: 'c', decision: 'approved' }, undefined],
    [{ callId: 'c', decision: 'awaiting_approval' }, undefined],
    [{ decision: 'rejected', category: 'unauthenticated' }, undefined],
    [{ callId: 'c', decision: 'rejected', category: 'forbidden' }, undefined],
  ] as const)('%j counts as %s', (entry, outcome) => {
    expect(outcomeOf(entry)).toBe(outcome);
  });
});

/** The value of the sample `name` whose labels include `labels` (label order is the library's business). */
function sample(body: string, name: string, labels: Record<string, string>): number | undefined {
  for (const line of body.split('\n')) {
    const match = /^([a-z_]+)\{(.*)\} (\S+)$/.exec(line);
    if (match?.[1] !== name) continue;
    const found = new Map<string, string>();
    for (const [, key, value] of match[2]!.matchAll(/([a-z_]+)="([^"]*)"/g)) found.set(key!, value!);
    if (Object.entries(labels).every(([k, v]) => found.get(k) === v)) return Number(match[3]);
  }
  return undefined;
}

describe('FleetMetrics', () => {
  it('counts audited outcomes by tool, tier and outcome, and never labels a name the catalog does not know', async () => {
    const metrics = new FleetMetrics('dispatcher');
    metrics.knownTools((name) => name === 'echo');
    const audit = new MemoryAuditLogger();
    const metered = new MeteredAuditLogger(audit, metrics);
    const at = new Date().toISOString();
    await metered.record({ at, callId: '1', tool: 'echo', tier: 'platform', decision: 'completed' });
    await metered.record({ at, callId: '2', tool: 'echo', tier: 'platform', decision: 'completed' });
    await metered.record({ at, callId: '3', tool: 'made-up-by-a-caller', decision: 'rejected', category: 'not_found' });
    expect(audit.entries).toHaveLength(3);
    const { body, contentType } = await metrics.scrape();
    expect(contentType).toMatch(/^text\/plain/);
    expect(sample(body, 'forge_calls_total', { tool: 'echo', tier: 'platform', outcome: 'completed', role: 'dispatcher' })).toBe(2);
    expect(sample(body, 'forge_calls_total', { tool: '(unknown)', tier: '', outcome: 'rejected' })).toBe(1);
    expect(body).not.toContain('made-up-by-a-caller');
  });

  it('times runs in seconds, and reads queue depth, live workers and pending approvals at scrape time', async () => {
    let pending = 3;
    const metrics = new FleetMetrics('dispatcher', {
      queues: () => Promise.resolve({ at: 0, queues: [{ lane: 'host.gpu', tier: 'host' as const, pool: 'gpu', queue: '{f.host.gpu}', waiting: 7, active: 2, delayed: 1, failed: 0, workers: 4 }] }),
      approvalsPending: () => Promise.resolve(pending),
    });
    metrics.observeRun('echo', 'platform', { queueWaitMs: 1500, executionMs: 20, endToEndMs: 1520 });
    let { body } = await metrics.scrape();
    expect(sample(body, 'forge_call_queue_wait_seconds_sum', { tool: 'echo', tier: 'platform' })).toBe(1.5);
    expect(sample(body, 'forge_call_execution_seconds_count', { tool: 'echo', tier: 'platform' })).toBe(1);
    expect(sample(body, 'forge_call_duration_seconds_bucket', { tool: 'echo', le: '1' })).toBe(0);
    expect(sample(body, 'forge_call_duration_seconds_bucket', { tool: 'echo', le: '2.5' })).toBe(1);
    expect(sample(body, 'forge_queue_jobs', { tier: 'host', pool: 'gpu', state: 'waiting' })).toBe(7);
    expect(sample(body, 'forge_workers', { tier: 'host', pool: 'gpu' })).toBe(4);
    expect(sample(body, 'forge_approvals_pending', { role: 'dispatcher' })).toBe(3);
    pending = 0;
    ({ body } = await metrics.scrape());
    expect(sample(body, 'forge_approvals_pending', { role: 'dispatcher' })).toBe(0);
  });
});
