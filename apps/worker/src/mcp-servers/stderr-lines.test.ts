import { describe, expect, it } from 'vitest';
import { StderrLines } from './stderr-lines.js';

function collect(options: { secrets?: string[]; maxLines?: number; windowMs?: number; now?: () => number } = {}) {
  const lines: string[] = [];
  const dropped: number[] = [];
  const reader = new StderrLines({ secrets: options.secrets ?? [], maxLines: options.maxLines ?? 100, windowMs: options.windowMs ?? 10_000, now: options.now ?? (() => 0) }, (line) => lines.push(line), (n) => dropped.push(n));
  return { reader, lines, dropped };
}

describe('StderrLines', () => {
  it('passes on whole lines however the chunks split them, and the last unfinished one at the end', () => {
    const { reader, lines } = collect();
    reader.push(Buffer.from('first li'));
    reader.push(Buffer.from('ne\r\nsecond\n\nthi'));
    expect(lines).toEqual(['first line', 'second']);
    reader.end();
    expect(lines).toEqual(['first line', 'second', 'thi']);
  });

  it("never passes on a secret value of the server's environment, even split across chunks", () => {
    const { reader, lines } = collect({ secrets: ['sk-live-12345'] });
    reader.push(Buffer.from('token=sk-live-'));
    reader.push(Buffer.from('12345 ok\n'));
    expect(lines).toEqual(['token=[redacted] ok']);
  });

  it('cuts a long line, and keeps reading the next one whole', () => {
    const { reader, lines } = collect();
    reader.push(Buffer.from(`${'x'.repeat(10_000)}\nnext\n`));
    expect(lines[0]).toHaveLength(2_000 + '… (10000 characters)'.length);
    expect(lines[0]!.endsWith('… (10000 characters)')).toBe(true);
    expect(lines[1]).toBe('next');
  });

  it('holds a line that never ends to its bound, not to its length', () => {
    const { reader, lines } = collect();
    for (let i = 0; i < 1_000; i++) reader.push(Buffer.from('y'.repeat(10_000)));
    reader.push(Buffer.from('\n'));
    expect(lines).toHaveLength(1);
    expect(lines[0]!.endsWith('… (10000000 characters)')).toBe(true);
  });

  it('passes at most maxLines a window, then says how many it left out when the window ends', () => {
    let now = 0;
    const { reader, lines, dropped } = collect({ maxLines: 3, windowMs: 1_000, now: () => now });
    reader.push(Buffer.from('a\nb\nc\nd\ne\n'));
    expect(lines).toEqual(['a', 'b', 'c']);
    expect(dropped).toEqual([]);
    now = 1_500;
    reader.push(Buffer.from('f\n'));
    expect(dropped).toEqual([2]);
    expect(lines).toEqual(['a', 'b', 'c', 'f']);
    reader.push(Buffer.from('g\nh\ni\n'));
    reader.end();
    expect(dropped).toEqual([2, 1]);
  });
});
