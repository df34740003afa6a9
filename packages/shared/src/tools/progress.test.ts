import { afterEach, describe, expect, it, vi } from 'vitest';
import { runExecutor } from '../pipeline/run.js';
import { defineTool } from './tool.js';
import { type CallProgress, MAX_PROGRESS_MESSAGE, ProgressThrottle, progressOf } from './progress.js';

describe('progressOf', () => {
  it('stamps a well-formed report and keeps only the fields given', () => {
    expect(progressOf({ progress: 2, total: 5, message: 'two' }, 1000)).toEqual({ progress: 2, total: 5, message: 'two', at: 1000 });
    expect(progressOf({ progress: 0.5 }, 7)).toEqual({ progress: 0.5, at: 7 });
  });

  it('cuts a long message to the limit', () => {
    const { message } = progressOf({ progress: 1, message: 'x'.repeat(MAX_PROGRESS_MESSAGE * 2) });
    expect(message).toHaveLength(MAX_PROGRESS_MESSAGE);
    expect(message?.endsWith('…')).toBe(true);
  });

  it.each([
    [{ progress: Number.NaN }, /progress must be a finite number/],
    [{ progress: Infinity }, /progress must be a finite number/],
    [{ progress: '3' }, /progress must be a finite number/],
    [{ progress: 1, total: 0 }, /total must be a positive finite number/],
    [{ progress: 1, total: -2 }, /total must be a positive finite number/],
    [{ progress: 1, message: 42 }, /message must be a string/],
    [null, /takes an object/],
  ])('refuses %j with a TypeError that says what is wrong', (update, message) => {
    expect(() => progressOf(update as never)).toThrow(message);
    expect(() => progressOf(update as never)).toThrow(TypeError);
  });
});

describe('ProgressThrottle', () => {
  afterEach(() => {
    vi.useRealTimers();
  });
  const at = (progress: number): CallProgress => ({ progress, at: 0 });

  it('sends the first report at once, then at most one per interval, keeping only the newest', () => {
    vi.useFakeTimers();
    const sent: number[] = [];
    const throttle = new ProgressThrottle(100, (p) => sent.push(p.progress));
    throttle.push(at(1));
    throttle.push(at(2));
    throttle.push(at(3));
    expect(sent).toEqual([1]);
    vi.advanceTimersByTime(100);
    expect(sent).toEqual([1, 3]);
    vi.advanceTimersByTime(500);
    throttle.push(at(4));
    expect(sent).toEqual([1, 3, 4]);
  });

  it('sends the pending report at once when closed (the last report before the result), and nothing after', () => {
    vi.useFakeTimers();
    const sent: number[] = [];
    const throttle = new ProgressThrottle(100, (p) => sent.push(p.progress));
    throttle.push(at(0));
    throttle.push(at(50));
    throttle.push(at(100));
    throttle.close();
    expect(sent).toEqual([0, 100]);
    vi.advanceTimersByTime(1000);
    throttle.push(at(3));
    throttle.close();
    expect(sent).toEqual([0, 100]);
  });

  it('sends nothing more when closed with nothing pending', () => {
    vi.useFakeTimers();
    const sent: number[] = [];
    const throttle = new ProgressThrottle(100, (p) => sent.push(p.progress));
    throttle.push(at(1));
    vi.advanceTimersByTime(500);
    throttle.close();
    expect(sent).toEqual([1]);
  });
});

describe('ctx.progress in runExecutor', () => {
  const call = { id: 'c1', name: 'steps', arguments: {} };

  it('passes checked reports to onProgress while the call runs, and none after it ended', async () => {
    let late: (() => void) | undefined;
    const tool = defineTool({
      name: 'steps',
      tier: 'platform',
      handler: (_args, ctx) => {
        ctx.progress({ progress: 1, total: 2, message: 'half' });
        late = () => ctx.progress({ progress: 2, total: 2 });
        return 'done';
      },
    });
    const heard: CallProgress[] = [];
    const result = await runExecutor(tool.executor!, tool.definition, call, { onProgress: (p) => heard.push(p) });
    expect(result.isError).toBe(false);
    late?.();
    expect(heard).toEqual([{ progress: 1, total: 2, message: 'half', at: expect.any(Number) as number }]);
  });

  it('fails the call with the report problem when a handler reports nonsense', async () => {
    const tool = defineTool({ name: 'steps', tier: 'platform', handler: (_args, ctx) => {
        ctx.progress({ progress: Number.NaN });
        return 'unreachable';
      },
    });
    const result = await runExecutor(tool.executor!, tool.definition, call);
    expect(result).toMatchObject({ isError: true, error: { code: 'EXECUTION_FAILED' }, content: expect.stringContaining('progress must be a finite number') as string });
  });
});
