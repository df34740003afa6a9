import { type CallEnvelope, CancelledError, errorResult, MemoryAuditLogger, type ToolResult } from '@forge-fleet/shared';
import type { CallStore, ReplyPublisher } from '@forge-fleet/store';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { CallAnswers } from './call-answers.js';

const QUEUE = '{forge.platform}.e06a9771f86163b';

/** A CallAnswers whose record ends (or had ended, `ends: false`) as the store's script would say; its audit entries kept. */
function answersWith(ends: boolean): { answers: CallAnswers; audit: MemoryAuditLogger } {
  const audit = new MemoryAuditLogger();
  const store = { end: () => Promise.resolve(ends) } as unknown as CallStore;
  const answers = new CallAnswers({ lane: 'platform', queue: QUEUE, workerId: 'w1', store, replies: {} as ReplyPublisher, audit, maxResultBytes: 1 << 20, log: pino({ level: 'silent' }) });
  return { answers, audit };
}

const envelope: CallEnvelope = { v: 1, call: { id: 'c1', name: 'block', arguments: {} }, tier: 'platform', replyTo: 'd1', enqueuedAt: 0, caller: 'agent-7' };
const done: ToolResult = { toolCallId: 'c1', name: 'block', content: 'done', isError: false };
const cancelled = errorResult(envelope.call, new CancelledError('block', 'cancelled by its caller'));

describe("a worker's outcome entries in the audit", () => {
  it('writes one per call it ends, completed, failed or cancelled, with the pack queue it took the call from as scopeAtDispatch', async () => {
    for (const [status, result, code] of [
      ['completed', done, undefined],
      ['failed', errorResult(envelope.call, new CancelledError('block', 'x')), 'CANCELLED'],
      // A running call its caller cancelled ends here, not at the dispatcher (which only asked): before, it had no final entry.
      ['cancelled', cancelled, 'CANCELLED'],
    ] as const) {
      const { answers, audit } = answersWith(true);
      await answers.finish(envelope, status, result);
      expect(audit.entries).toEqual([
        { at: expect.any(String) as string, decision: status, callId: 'c1', tool: 'block', tier: 'platform', scopeAtDispatch: QUEUE, caller: 'agent-7', ...(code === undefined ? {} : { code }) },
      ]);
    }
  });

  it('writes none for a call that had ended before (the dispatcher, or another worker, wrote its entry)', async () => {
    const { answers, audit } = answersWith(false);
    await answers.finish(envelope, 'cancelled', cancelled);
    await answers.finish(envelope, 'completed', done);
    expect(audit.entries).toEqual([]);
  });
});
