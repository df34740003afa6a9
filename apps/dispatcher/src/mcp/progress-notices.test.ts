import { describe, expect, it } from 'vitest';
import { type ProgressNotice, ProgressNotices } from './progress-notices.js';

/** Plays events through one request's notices and returns what went out. */
function play(events: ({ status: Parameters<ProgressNotices['status']>[0] } | { progress: number; total?: number; message?: string })[]): ProgressNotice[] {
  const notices = new ProgressNotices();
  const sent: ProgressNotice[] = [];
  for (const event of events) {
    const notice = 'status' in event ? notices.status(event.status) : notices.report(event);
    if (notice !== undefined) sent.push(notice);
  }
  return sent;
}

const increasing = (sent: ProgressNotice[]) => sent.every((n, i) => i === 0 || n.progress > sent[i - 1]!.progress);

describe('ProgressNotices', () => {
  it("keeps a tool's 0 after `queued` (shifting the tool's scale by one), and ends with the final status", () => {
    const sent = play([
      { status: 'queued' },
      { progress: 0, total: 100, message: 'starting' },
      { progress: 50, total: 100, message: 'halfway' },
      { progress: 100, total: 100, message: 'done' },
      { status: 'completed' },
    ]);
    expect(sent).toEqual([
      { progress: 0, message: 'queued' },
      { progress: 1, total: 101, message: 'starting' },
      { progress: 51, total: 101, message: 'halfway' },
      { progress: 101, total: 101, message: 'done' },
      { progress: 102, total: 102, message: 'completed' },
    ]);
    expect(increasing(sent)).toBe(true);
  });

  it("passes the tool's own numbers when they already exceed the statuses sent", () => {
    expect(play([{ status: 'queued' }, { progress: 1, total: 3 }, { progress: 3, total: 3 }, { status: 'completed' }])).toEqual([
      { progress: 0, message: 'queued' },
      { progress: 1, total: 3 },
      { progress: 3, total: 3 },
      { progress: 4, total: 4, message: 'completed' },
    ]);
  });

  it("passes a tool's fractional first report unshifted when it is above the last notice", () => {
    const sent = play([{ status: 'queued' }, { progress: 0.1, total: 1 }, { progress: 0.2, total: 1 }, { progress: 0.5, total: 1 }, { status: 'completed' }]);
    expect(sent).toEqual([
      { progress: 0, message: 'queued' },
      { progress: 0.1, total: 1 },
      { progress: 0.2, total: 1 },
      { progress: 0.5, total: 1 },
      { progress: 1.5, total: 1.5, message: 'completed' },
    ]);
    expect(increasing(sent)).toBe(true);
  });

  it('shifts a first report equal to the last notice one past it, and one below it likewise', () => {
    expect(play([{ status: 'queued' }, { status: 'running' }, { progress: 1, total: 4 }, { progress: 1.5, total: 4 }]).map((n) => [n.progress, n.total])).toEqual([
      [0, undefined],
      [1, undefined],
      [2, 5],
      [2.5, 5],
    ]);
    expect(play([{ status: 'queued' }, { status: 'running' }, { progress: 0.25, total: 1 }]).at(-1)).toEqual({ progress: 2, total: 2.75 });
  });

  it('counts statuses 0, 1, 2… until the tool reports, then leaves intermediate statuses out', () => {
    const sent = play([{ status: 'queued' }, { status: 'running' }, { progress: 0.5, total: 1 }, { status: 'running' }, { progress: 1, total: 1 }, { status: 'failed' }]);
    expect(sent.map((n) => n.progress)).toEqual([0, 1, 2, 2.5, 3.5]);
    expect(sent.at(-1)).toEqual({ progress: 3.5, total: 3.5, message: 'failed' });
  });

  it('sends no report that does not advance (a repeated or a going-back report), and nothing after the end', () => {
    const sent = play([
      { status: 'queued' },
      { progress: 5 },
      { progress: 5 },
      { progress: 2 },
      { progress: 6 },
      { status: 'completed' },
      { progress: 9 },
      { status: 'completed' },
    ]);
    expect(sent.map((n) => n.progress)).toEqual([0, 5, 6, 7]);
  });

  it('starts at 0 when the tool reports before any status notice, even with negative numbers', () => {
    expect(play([{ progress: -3 }, { progress: -1 }, { status: 'completed' }]).map((n) => n.progress)).toEqual([0, 2, 3]);
  });
});
