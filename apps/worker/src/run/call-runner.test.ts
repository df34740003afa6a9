import { errorResult, ExecutionFailedError, CancelledError } from '@forge-fleet/shared';
import { describe, expect, it } from 'vitest';
import { retryableOnlyIfSafe } from './call-runner.js';

describe('retryableOnlyIfSafe', () => {
  const call = { id: 'c1', name: 'pay' };
  it('tells the caller a failure is not retryable when the tool is not flagged retryable', () => {
    const failed = errorResult(call, new ExecutionFailedError('pay', 'the bank said no'));
    expect(failed.error?.retryable).toBe(true);
    expect(retryableOnlyIfSafe(failed, false).error).toMatchObject({ code: 'EXECUTION_FAILED', retryable: false });
    expect(retryableOnlyIfSafe(failed, true).error?.retryable).toBe(true);
  });

  it('leaves results without a retryable error as they are', () => {
    const ok = { toolCallId: 'c1', name: 'pay', content: 'done', isError: false };
    expect(retryableOnlyIfSafe(ok, false)).toBe(ok);
    const invalid = errorResult(call, new CancelledError('pay', 'cancelled by its caller'));
    expect(retryableOnlyIfSafe(invalid, false)).toBe(invalid);
  });
});
