import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { AnswerLines, tooLargeBytes } from './answer-lines.js';

const MAX = 128;

function read(lines: AnswerLines): unknown[] {
  const out: unknown[] = [];
  for (let m = lines.readMessage(); m !== null; m = lines.readMessage()) out.push(m);
  return out;
}

const response = (id: number | string, text: string) => JSON.stringify({ result: { content: [{ type: 'text', text }] }, jsonrpc: '2.0', id });

describe('AnswerLines', () => {
  it('splits messages across and within chunks, and drops a trailing \\r', () => {
    const lines = new AnswerLines(MAX);
    const a = response(1, 'a');
    const b = response(2, 'b');
    lines.append(Buffer.from(`${a.slice(0, 5)}`));
    expect(read(lines)).toEqual([]);
    lines.append(Buffer.from(`${a.slice(5)}\r\n${b}\n`));
    expect(read(lines)).toEqual([JSON.parse(a), JSON.parse(b)]);
  });

  it('answers an oversized response with an error for its id (id last, as the SDKs write it), and reads on', () => {
    const lines = new AnswerLines(MAX);
    const big = response(7, 'x'.repeat(500));
    lines.append(Buffer.from(big.slice(0, 30)));
    lines.append(Buffer.from(big.slice(30, 200)));
    lines.append(Buffer.from(`${big.slice(200)}\n${response(8, 'ok')}\n`));
    const [first, second] = read(lines) as [{ id: number; error: { code: number; message: string; data: unknown } }, unknown];
    expect(first.id).toBe(7);
    expect(tooLargeBytes(new McpError(first.error.code, first.error.message, first.error.data))).toEqual({ bytes: Buffer.byteLength(big), atLeast: false, bound: 128 });
    expect(second).toEqual(JSON.parse(response(8, 'ok')));
  });

  it('finds the id at the start too (Python writes jsonrpc, id, result), a string id as well', () => {
    const lines = new AnswerLines(MAX);
    lines.append(Buffer.from(`{"jsonrpc": "2.0", "id": "call-\\"9\\"", "result": {"content": [{"type": "text", "text": "${'y'.repeat(300)}"}]}}\n`));
    expect(read(lines)).toMatchObject([{ id: 'call-"9"', error: { code: expect.any(Number) as unknown } }]);
  });

  it('drops an oversized notification without an answer (nothing waits for it)', () => {
    const lines = new AnswerLines(MAX);
    lines.append(Buffer.from(`${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: 'z'.repeat(400) } })}\n${response(3, 'after')}\n`));
    expect(read(lines)).toEqual([JSON.parse(response(3, 'after'))]);
  });

  it('does not take an id from inside a result', () => {
    const lines = new AnswerLines(MAX);
    lines.append(Buffer.from(`${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/message', params: { data: `${'q'.repeat(300)}`, x: { id: 5 } } })}\n`));
    expect(read(lines)).toEqual([]);
  });

  it('throws for a line that is not JSON-RPC, as the SDK reader does, and reads the next', () => {
    const lines = new AnswerLines(MAX);
    lines.append(Buffer.from(`not json\n${response(4, 'ok')}\n`));
    expect(() => lines.readMessage()).toThrow();
    expect(lines.readMessage()).toEqual(JSON.parse(response(4, 'ok')));
  });

  it('is no error of anything else', () => {
    expect(tooLargeBytes(new McpError(-32090, 'a server of its own', { other: 1 }))).toBeUndefined();
    expect(tooLargeBytes(new Error('x'))).toBeUndefined();
  });
});
