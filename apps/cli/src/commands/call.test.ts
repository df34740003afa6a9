import type { CallView } from '@forge-fleet/shared';
import { describe, expect, it } from 'vitest';
import type { CliContext } from '../context.js';
import type { FleetApi } from '../endpoint.js';
import { runCall, WAIT_ROUND_MS } from './call.js';

type CallApi = Pick<FleetApi, 'submit' | 'get'>;

/** A fake dispatcher answering with `views` in turn: the submission first, then each wait round; it records the rounds. */
function fleet(views: CallView[], clock: { t: number }, roundMs = WAIT_ROUND_MS) {
  const rounds: { id: string; waitMs: number | undefined }[] = [];
  const submitted: unknown[] = [];
  const api: CallApi = {
    submit: (name, args, options) => {
      submitted.push({ name, args, options });
      return Promise.resolve(views.shift()!);
    },
    get: (id, options) => {
      rounds.push({ id, waitMs: options?.waitMs });
      clock.t += Math.min(roundMs, options?.waitMs ?? 0);
      const next = views.shift();
      if (next === undefined) throw new Error('asked for more rounds than the test scripted');
      return Promise.resolve(next);
    },
  };
  return { api, rounds, submitted };
}

function context(clock: { t: number }) {
  const out = { stdout: '', stderr: '' };
  const ctx: CliContext = {
    env: { FORGE_STATE_DIR: '.forge' },
    stdout: { write: (s: string) => (out.stdout += s) },
    stderr: { write: (s: string) => (out.stderr += s), isTTY: false },
    now: () => clock.t,
  };
  return { ctx, out };
}

const completed: CallView = { id: 'c1', status: 'completed', result: { toolCallId: 'c1', name: 'echo', content: '{"n":1}', isError: false, structuredContent: { n: 1 } } };

describe('forge call', () => {
  it('without --wait prints the id and status of the submitted call', async () => {
    const clock = { t: 0 };
    const { api, rounds, submitted } = fleet([{ id: 'c1', status: 'awaiting_approval', reason: 'a person must confirm' }], clock);
    const { ctx, out } = context(clock);
    expect(await runCall(api, { tool: 'refund', args: { amount: 5 }, id: 'c1', wait: false, json: false }, ctx)).toBe(0);
    expect(out.stdout).toBe('c1 awaiting_approval (a person must confirm)\n');
    expect(submitted).toEqual([{ name: 'refund', args: { amount: 5 }, options: { id: 'c1' } }]);
    expect(rounds).toEqual([]);
  });

  it('with --wait waits in rounds of about a second, shows each change on stderr, and prints the structured result', async () => {
    const clock = { t: 0 };
    const step = (progress: number): CallView => ({ id: 'c1', status: 'running', progress: { progress, total: 2, message: `step ${progress}`, at: 1 } });
    // The wait that ends answers from the worker's reply (no progress); the record, read once more, has the last report.
    const { api, rounds } = fleet([{ id: 'c1', status: 'queued' }, step(1), step(1), completed, { ...completed, progress: step(2).progress! }], clock);
    const { ctx, out } = context(clock);
    expect(await runCall(api, { tool: 'echo', args: { n: 1 }, wait: true, json: false }, ctx)).toBe(0);
    expect(rounds).toHaveLength(4);
    expect(rounds.slice(0, 3).every((r) => r.id === 'c1' && r.waitMs === WAIT_ROUND_MS)).toBe(true);
    expect(rounds[3]).toEqual({ id: 'c1', waitMs: undefined });
    expect(out.stderr.trimEnd().split('\n')).toEqual([
      'call c1 · queued · 0s',
      'call c1 · running · 1/2 (50%) step 1 · 1s',
      'call c1 · completed · 2/2 (100%) step 2 · 3s',
    ]);
    expect(out.stdout).toBe('{\n  "n": 1\n}\n');
  });

  it('with --wait prints the structured content of a result that also has content blocks, as pretty JSON', async () => {
    const clock = { t: 0 };
    const charted: CallView = {
      ...completed,
      result: { toolCallId: 'c1', name: 'chart', content: 'the chart', isError: false, structuredContent: { points: 3 }, blocks: [{ type: 'text', text: 'the chart' }, { type: 'image', data: 'AAAA', mimeType: 'image/png' }] },
    };
    const { api } = fleet([charted, charted], clock);
    const { ctx, out } = context(clock);
    expect(await runCall(api, { tool: 'chart', args: {}, wait: true, json: false }, ctx)).toBe(0);
    expect(out.stdout).toBe('{\n  "points": 3\n}\n');
  });

  it('exits 1 for a failed call, with its error code and message on stderr; --json prints the view as well', async () => {
    const failed: CallView = {
      id: 'c2',
      status: 'failed',
      result: { toolCallId: 'c2', name: 'slow', content: 'timed out', isError: true, error: { code: 'EXECUTION_TIMEOUT', message: "tool 'slow' timed out after 300 ms", retryable: true, details: {} } },
    };
    const clock = { t: 0 };
    const { api } = fleet([failed], clock);
    const { ctx, out } = context(clock);
    expect(await runCall(api, { tool: 'slow', args: {}, wait: true, json: true }, ctx)).toBe(1);
    expect(out.stderr).toContain("forge: EXECUTION_TIMEOUT: tool 'slow' timed out after 300 ms\n");
    expect(JSON.parse(out.stdout)).toEqual(failed);
  });

  it('exits 1 for a cancelled call', async () => {
    const cancelled: CallView = {
      id: 'c3',
      status: 'cancelled',
      result: { toolCallId: 'c3', name: 'block', content: 'cancelled', isError: true, error: { code: 'CANCELLED', message: 'cancelled by its caller', retryable: false, details: {} } },
    };
    const clock = { t: 0 };
    const { api } = fleet([{ id: 'c3', status: 'running' }, cancelled], clock);
    const { ctx, out } = context(clock);
    expect(await runCall(api, { tool: 'block', args: {}, wait: true, json: false }, ctx)).toBe(1);
    expect(out.stderr).toContain('forge: CANCELLED: cancelled by its caller');
    expect(out.stdout).toBe('');
  });

  it('gives up waiting after --timeout with WAIT_TIMEOUT (the call goes on), never holding a round past it', async () => {
    const clock = { t: 0 };
    const { api, rounds } = fleet([{ id: 'c4', status: 'queued' }, { id: 'c4', status: 'running' }, { id: 'c4', status: 'running' }, { id: 'c4', status: 'running' }], clock);
    const { ctx } = context(clock);
    await expect(runCall(api, { tool: 'gated', args: {}, wait: true, timeoutMs: 2500, json: false }, ctx)).rejects.toMatchObject({ code: 'WAIT_TIMEOUT', callId: 'c4' });
    expect(rounds.map((r) => r.waitMs)).toEqual([1000, 1000, 500]);
  });
});
