import { describe, expect, it } from 'vitest';
import { lineReader, Outbox } from './framing.js';

describe('sandbox channel framing', () => {
  it('sends every message of an event-loop iteration in one write, in order, each on its own line', async () => {
    const writes: string[] = [];
    const outbox = new Outbox((text) => writes.push(text));
    outbox.send('{"a":1}');
    outbox.send('{"b":2}');
    expect(writes).toEqual([]);
    await new Promise((resolve) => setImmediate(resolve));
    expect(writes).toEqual(['{"a":1}\n{"b":2}\n']);
    outbox.send('{"c":3}');
    outbox.flush();
    expect(writes).toEqual(['{"a":1}\n{"b":2}\n', '{"c":3}\n']);
  });

  it('reads whole lines across chunk boundaries, multi-byte characters split between chunks included', () => {
    const lines: string[] = [];
    const read = lineReader((line) => lines.push(line));
    const bytes = Buffer.from('{"x":"é€"}\n{"y":2}\n{"z":', 'utf8');
    // Cut inside the two-byte é and inside the three-byte €.
    const cuts = [7, 9, 11, bytes.length];
    let from = 0;
    for (const to of cuts) {
      read(bytes.subarray(from, to));
      from = to;
    }
    expect(lines).toEqual(['{"x":"é€"}', '{"y":2}']);
    read(Buffer.from('3}\n\n', 'utf8'));
    expect(lines).toEqual(['{"x":"é€"}', '{"y":2}', '{"z":3}']);
  });
});
