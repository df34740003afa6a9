import { describe, expect, it } from 'vitest';
import { afterLostRun, afterRun, mayRun, type RunFacts } from './retry-policy.js';

const facts = (over: Partial<RunFacts> = {}): RunFacts => ({ tool: 't', retryable: true, starts: 1, attempts: 3, backoffMs: 200, ...over });
const failed = (code: string | undefined) => ({ lostToShutdown: false, code, isError: true });

describe('afterRun', () => {
  it('ends a run that succeeded, or was cancelled, with its own result', () => {
    expect(afterRun(facts(), { lostToShutdown: false, code: undefined, isError: false })).toEqual({ then: 'end' });
    expect(afterRun(facts(), failed('CANCELLED'))).toEqual({ then: 'end' });
  });

  it('retries a retryable tool after a transient failure, backing off exponentially, within the attempts', () => {
    expect(afterRun(facts({ starts: 1 }), failed('EXECUTION_TIMEOUT'))).toEqual({ then: 'retry', delayMs: 200 });
    expect(afterRun(facts({ starts: 2 }), failed('EXECUTION_FAILED'))).toEqual({ then: 'retry', delayMs: 400 });
    expect(afterRun(facts({ starts: 3 }), failed('EXECUTION_FAILED'))).toEqual({ then: 'end' });
  });

  it('never retries a tool not flagged retryable, nor a failure that cannot pass', () => {
    expect(afterRun(facts({ retryable: false }), failed('EXECUTION_TIMEOUT'))).toEqual({ then: 'end' });
    expect(afterRun(facts(), failed('SCHEMA_VALIDATION'))).toEqual({ then: 'end' });
    expect(afterRun(facts(), failed('NOT_A_KNOWN_CODE'))).toEqual({ then: 'end' });
  });

  it('hands a run lost to a shutdown back at once when it may run again, else ends it WORKER_LOST saying why', () => {
    const lost = { lostToShutdown: true, code: 'CANCELLED', isError: true };
    expect(afterRun(facts(), lost)).toEqual({ then: 'retry', delayMs: 0 });
    const notRetryable = afterRun(facts({ retryable: false }), lost);
    expect(notRetryable).toMatchObject({ then: 'lost', error: { code: 'WORKER_LOST', reason: 'shutdown' } });
    const exhausted = afterRun(facts({ starts: 3 }), lost);
    expect(exhausted).toMatchObject({ then: 'lost', error: { code: 'WORKER_LOST', reason: 'retries_exhausted' } });
    expect(exhausted.then === 'lost' && exhausted.error.message).not.toMatch(/not flagged retryable/);
  });
});

describe('afterLostRun', () => {
  it('runs a retryable call again while attempts remain; else ends it WORKER_LOST with the reason', () => {
    expect(afterLostRun(facts({ starts: 2 }))).toEqual({ then: 'rerun' });
    expect(afterLostRun(facts({ starts: 3 }))).toEqual({ then: 'rerun' });
    expect(afterLostRun(facts({ starts: 4 }))).toMatchObject({ then: 'lost', error: { reason: 'retries_exhausted' } });
    expect(afterLostRun(facts({ retryable: false, starts: 2 }))).toMatchObject({ then: 'lost', error: { reason: 'lock_expired' } });
  });
});

describe('mayRun', () => {
  it('lets every envelope run once, a retryable tool as often as its attempts, and refuses every run beyond', () => {
    expect(mayRun({ retryable: false, attempts: 3 }, 1)).toBe(true);
    expect(mayRun({ retryable: false, attempts: 3 }, 2)).toBe(false);
    expect(mayRun({ retryable: true, attempts: 3 }, 3)).toBe(true);
    expect(mayRun({ retryable: true, attempts: 3 }, 4)).toBe(false);
    expect(mayRun({ retryable: true, attempts: 1 }, 2)).toBe(false);
  });
});
