import { describe, expect, it } from 'vitest';
import { StderrTail } from './stderr-tail.js';

const SECRET = 'PLATSECRET_ENV_4242';

describe('StderrTail', () => {
  it('keeps the last maxChars characters', () => {
    const tail = new StderrTail([], 10);
    tail.push(Buffer.from('0123456789abcdef'));
    expect(tail.text).toBe('6789abcdef');
  });

  it('redacts a secret before the tail is cut: no part of one is left at the cut', () => {
    // The cut falls one character into the secret (the QA finding: 18 of its 19 characters were logged).
    for (let offset = 0; offset <= SECRET.length; offset += 1) {
      const tail = new StderrTail([SECRET], 100);
      tail.push(Buffer.from(`x${SECRET}\n${'D'.repeat(100 - SECRET.length - 1 + offset)}`));
      expect(tail.text, `offset ${offset}`).not.toMatch(/LATSECRET|SECRET_ENV|_4242/);
      expect(tail.text.length).toBeLessThanOrEqual(100);
    }
  });

  it('redacts a secret split across chunks at every point, and a cut made between them', () => {
    for (let split = 1; split < SECRET.length; split += 1) {
      const tail = new StderrTail([SECRET], 12);
      tail.push(Buffer.from(`a${SECRET.slice(0, split)}`));
      tail.push(Buffer.from(`${SECRET.slice(split)}${'D'.repeat(3)}`));
      expect(tail.text, `split ${split}`).toBe('[redacted]DDD'.slice(-12));
    }
  });

  it('shows a held-back prefix as written once no secret follows it', () => {
    const tail = new StderrTail([SECRET], 100);
    tail.push(Buffer.from('ends with PLATSEC'));
    expect(tail.text).toBe('ends with PLATSEC');
    tail.push(Buffer.from('URE\n'));
    expect(tail.text).toBe('ends with PLATSECURE\n');
  });

  it('decodes a character split across chunks', () => {
    const bytes = Buffer.from('é€', 'utf8');
    const tail = new StderrTail([], 100);
    tail.push(bytes.subarray(0, 1));
    tail.push(bytes.subarray(1));
    expect(tail.text).toBe('é€');
  });
});
