import { describe, expect, it } from 'vitest';
import { parseToolCalls } from './parse.js';

const ids = { newId: (i: number) => `gen-${i}` };
const fence = '```';

describe('parseToolCalls', () => {
  it('extracts a fenced tool_call block', () => {
    const text = `Let me check.\n${fence}tool_call\n{"name": "search", "arguments": {"q": "forge"}}\n${fence}\nDone.`;
    expect(parseToolCalls(text, ids)).toEqual({ calls: [{ id: 'gen-0', name: 'search', arguments: { q: 'forge' } }], errors: [] });
  });

  it('extracts several blocks in order and keeps ids the model gave', () => {
    const text = [`${fence}tool_call`, '{"id": "a1", "name": "one"}', fence, 'text', `${fence}tool_call`, '{"name": "two", "arguments": {}}', fence].join('\n');
    const { calls } = parseToolCalls(text, ids);
    expect(calls).toEqual([
      { id: 'a1', name: 'one', arguments: {} },
      { id: 'gen-1', name: 'two', arguments: {} },
    ]);
  });

  it('generates unique ids by default', () => {
    const block = `${fence}tool_call\n{"name": "x"}\n${fence}`;
    const { calls } = parseToolCalls(`${block}\n${block}`);
    expect(calls[0]?.id).toMatch(/^call_/);
    expect(calls[0]?.id).not.toBe(calls[1]?.id);
  });

  it('leaves ordinary code fences alone', () => {
    const text = [`${fence}json`, '{"name": "not_a_call"}', fence, fence, 'plain', fence, `${fence}python`, 'print(1)', fence].join('\n');
    expect(parseToolCalls(text, ids)).toEqual({ calls: [], errors: [] });
  });

  it('ignores a tool_call block quoted inside a longer fence', () => {
    const text = ['````markdown', `${fence}tool_call`, '{"name": "quoted"}', fence, '````'].join('\n');
    expect(parseToolCalls(text, ids).calls).toEqual([]);
  });

  it('accepts tilde fences, indentation up to three spaces, and attributes after the info string', () => {
    const text = ['~~~tool_call', '{"name": "tilde"}', '~~~', '   ```tool_call id=1', '{"name": "indented"}', '   ```'].join('\n');
    expect(parseToolCalls(text, ids).calls.map((c) => c.name)).toEqual(['tilde', 'indented']);
  });

  it('needs a closing fence at least as long as the opening one', () => {
    const text = ['````tool_call', '{"name": "long"}', '```', '````'].join('\n');
    const { calls, errors } = parseToolCalls(text, ids);
    expect(errors).toHaveLength(1); // the body includes the short fence line, so it is not JSON
    expect(calls).toEqual([]);
  });

  it('handles CRLF line endings', () => {
    const text = `${fence}tool_call\r\n{"name": "crlf"}\r\n${fence}\r\n`;
    expect(parseToolCalls(text, ids).calls.map((c) => c.name)).toEqual(['crlf']);
  });

  it('accepts arguments sent as a JSON-encoded string', () => {
    const text = `${fence}tool_call\n{"name": "s", "arguments": "{\\"a\\": 1}"}\n${fence}`;
    expect(parseToolCalls(text, ids).calls[0]?.arguments).toEqual({ a: 1 });
  });

  it('reports malformed blocks with their position and keeps going', () => {
    const text = ['intro', `${fence}tool_call`, '{not json', fence, `  ${fence}tool_call`, '{"name": "ok"}', '  ' + fence].join('\n');
    const { calls, errors } = parseToolCalls(text, ids);
    expect(calls.map((c) => c.name)).toEqual(['ok']);
    expect(errors).toHaveLength(1);
    expect(errors[0]?.code).toBe('MALFORMED_TOOL_BLOCK');
    expect(errors[0]?.details).toMatchObject({ line: 2, column: 1, offset: 6 });
    expect(errors[0]?.message).toContain('not valid JSON');
  });

  it.each([
    ['[1, 2]', 'must be a JSON object, got array'],
    ['{"arguments": {}}', '"name" field is missing'],
    ['{"name": "bad name"}', '"name" must be'],
    ['{"name": "x", "arguments": [1]}', '"arguments" must be a JSON object, got array'],
    ['{"name": "x", "arguments": "not json"}', '"arguments" must be a JSON object, got string'],
    ['{"name": "x", "id": ""}', '"id" must be'],
    ['', 'the block is empty'],
  ])('reports %j as malformed: %s', (body, reason) => {
    const { errors } = parseToolCalls(`${fence}tool_call\n${body}\n${fence}`, ids);
    expect(errors).toHaveLength(1);
    expect(errors[0]?.details.reason).toContain(reason);
  });

  it('reports a block that is never closed, with its line and column', () => {
    const { errors } = parseToolCalls(`a\nb\n ${fence}tool_call\n{"name": "x"}`, ids);
    expect(errors[0]?.details).toMatchObject({ line: 3, column: 2 });
    expect(errors[0]?.message).toContain('never closed');
  });

  it('does not treat inline triple backticks as a fence', () => {
    expect(parseToolCalls('use ```tool_call``` blocks', ids)).toEqual({ calls: [], errors: [] });
    expect(parseToolCalls('```tool_call ` x\n{"name":"a"}\n```', ids).calls).toEqual([]);
  });
});
