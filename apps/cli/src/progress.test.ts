import type { CallView } from '@forge-fleet/shared';
import { describe, expect, it } from 'vitest';
import { describeCall, describeProgress, ProgressLine } from './progress.js';

function stream(tty: { columns?: number } | false) {
  const out = { text: '', isTTY: tty !== false, columns: tty === false ? undefined : tty.columns, write: (s: string) => (out.text += s) };
  return out;
}

const running = (progress?: CallView['progress']): CallView => ({ id: 'c1', status: 'running', ...(progress === undefined ? {} : { progress }) });

describe('progress line', () => {
  it('describes progress with and without a total, and fractional units', () => {
    expect(describeProgress({ progress: 3, total: 10, message: 'step 3', at: 1 })).toBe('3/10 (30%) step 3');
    expect(describeProgress({ progress: 7, at: 1 })).toBe('7');
    expect(describeProgress({ progress: 0.5, total: 1.5, at: 1 })).toBe('0.5/1.5 (33%)');
    expect(describeProgress({ progress: 12, total: 10, at: 1 })).toBe('12/10 (100%)');
  });

  it('says why a call waits for a person, and keeps a tool message from driving the terminal', () => {
    expect(describeCall({ id: 'c1', status: 'awaiting_approval', reason: 'a person must confirm' })).toBe('call c1 · awaiting_approval · a person must confirm');
    expect(describeCall(running({ progress: 1, message: 'x\u001b[2Jy', at: 1 }))).toBe('call c1 · running · 1 x [2Jy');
  });

  it('writes one line per change when stderr is not a terminal, not one per round', () => {
    const out = stream(false);
    const line = new ProgressLine(out);
    line.show({ id: 'c1', status: 'queued' }, 0);
    line.show(running(), 1000);
    line.show(running(), 2000);
    line.show(running({ progress: 1, total: 2, message: 'step 1', at: 5 }), 3000);
    line.show(running({ progress: 1, total: 2, message: 'step 1', at: 5 }), 4000);
    line.end();
    expect(out.text.split('\n')).toEqual(['call c1 · queued · 0s', 'call c1 · running · 1s', 'call c1 · running · 1/2 (50%) step 1 · 3s', '']);
  });

  it('rewrites one line in place on a terminal, never wider than it, and clears it at the end', () => {
    const out = stream({ columns: 20 });
    const line = new ProgressLine(out);
    line.show({ id: 'c1', status: 'queued' }, 0);
    line.show(running(), 1000);
    line.end();
    expect(out.text).toBe('\rcall c1 · queued · \x1b[K\rcall c1 · running ·\x1b[K\r\x1b[K');
    expect(out.text).not.toContain('\n');
  });
});
