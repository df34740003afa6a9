import { describe, expect, it } from 'vitest';
import { lineReader } from './lines.js';

describe('lineReader', () => {
  const collect = (max: number) => {
    const lines: string[] = [];
    let overflows = 0;
    const read = lineReader((line) => lines.push(line), { maxLineChars: max, onOverflow: () => overflows++ });
    return { read, lines, overflows: () => overflows };
  };

  it('reports a line over the limit once, whether it arrives in pieces or whole in one chunk, and keeps reading after it', () => {
    // In pieces: the unfinished tail grows past the limit before its newline comes.
    const pieces = collect(10);
    pieces.read(Buffer.from('ok\n0123456789'));
    pieces.read(Buffer.from('abcdef'));
    pieces.read(Buffer.from('ghij\nnext\n'));
    expect(pieces.lines).toEqual(['ok', 'next']);
    expect(pieces.overflows()).toBe(1);
    // Whole: the line and its newline in one chunk (a busy socket coalesces writes): the same answer.
    const whole = collect(10);
    whole.read(Buffer.from('ok\n0123456789abcdefghij\nnext\n'));
    expect(whole.lines).toEqual(['ok', 'next']);
    expect(whole.overflows()).toBe(1);
    // Its end in the chunk that pushes it over the limit.
    const end = collect(10);
    end.read(Buffer.from('01234'));
    end.read(Buffer.from('56789abcdefghij\nnext\n'));
    expect(end.lines).toEqual(['next']);
    expect(end.overflows()).toBe(1);
  });

  it('passes lines at the limit, and multi-byte characters split across chunks', () => {
    const at = collect(4);
    at.read(Buffer.from('abcd\n'));
    const euro = Buffer.from('€\n');
    at.read(euro.subarray(0, 1));
    at.read(euro.subarray(1));
    expect(at.lines).toEqual(['abcd', '€']);
    expect(at.overflows()).toBe(0);
  });
});
