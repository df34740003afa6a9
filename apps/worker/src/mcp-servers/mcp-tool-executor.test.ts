import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { resultOf } from './mcp-tool-executor.js';

const call = { id: 'c1', name: 'files.read' };
const of = (raw: unknown) => resultOf(call, raw as CallToolResult, 'files');
const PNG = Buffer.from('png bytes').toString('base64');

describe('resultOf (an MCP tools/call result as a fleet result)', () => {
  it("keeps a lone plain text block as today's text result, without blocks", () => {
    expect(of({ content: [{ type: 'text', text: 'hello' }] })).toEqual({ toolCallId: 'c1', name: 'files.read', content: 'hello', isError: false });
  });

  it('keeps every block, in order and as given, beside the text of the text blocks', () => {
    const content = [
      { type: 'text', text: 'a' },
      { type: 'image', data: PNG, mimeType: 'image/png', annotations: { audience: ['user'] } },
      { type: 'resource', resource: { uri: 'file:///x', blob: PNG } },
      { type: 'text', text: 'b' },
    ];
    const r = of({ content, structuredContent: { n: 1 } });
    expect(r).toMatchObject({ content: 'a\nb', isError: false, blocks: content, structuredContent: { n: 1 } });
    // A text block with more than its text (annotations) is kept as a block too.
    expect(of({ content: [{ type: 'text', text: 'x', annotations: { priority: 1 } }] }).blocks).toEqual([{ type: 'text', text: 'x', annotations: { priority: 1 } }]);
  });

  it('reads structured content alone as its JSON text', () => {
    expect(of({ content: [], structuredContent: { ok: true } })).toMatchObject({ content: '{"ok":true}', structuredContent: { ok: true }, isError: false });
  });

  it('fails the call, naming the block, for a block that is not an MCP content block', () => {
    for (const bad of [{ type: 'image', data: 'not base64!', mimeType: 'image/png' }, { type: 'video', uri: 'x' }, 'text', null]) {
      const r = of({ content: [{ type: 'text', text: 'ok' }, bad] });
      expect(r).toMatchObject({ isError: true, error: { code: 'EXECUTION_FAILED' } });
      expect(r.content).toMatch(/content block 1/);
    }
  });

  it('fails the call for structured content that is not a JSON object', () => {
    expect(of({ content: [], structuredContent: [1, 2] })).toMatchObject({ isError: true, error: { code: 'EXECUTION_FAILED' } });
  });

  it("is a failed call for the tool's own error, its content kept", () => {
    const r = of({ content: [{ type: 'text', text: 'no such file' }], isError: true });
    expect(r).toMatchObject({ isError: true, content: 'no such file', error: { code: 'EXECUTION_FAILED', message: expect.stringContaining('no such file') as string } });
  });

  it("fails the call, saying what is wrong, for a result whose 'content' is not an array or whose 'isError' is not a boolean", () => {
    for (const [raw, why] of [
      [{ content: 'the answer is 42' }, /'content' is a string, not an array of content blocks/],
      [{ content: { type: 'text', text: 'the answer is 42' } }, /'content' is an object, not an array of content blocks/],
      [{ content: null }, /'content' is null, not an array/],
      [{ content: [{ type: 'text', text: 'a' }], isError: 'yes' }, /'isError' is a string, not true or false/],
      [{ content: [{ type: 'text', text: 'a' }], isError: 1 }, /'isError' is a number, not true or false/],
    ] as const) {
      const r = of(raw);
      expect(r).toMatchObject({ isError: true, error: { code: 'EXECUTION_FAILED' } });
      expect(r.content).toMatch(why);
      expect(r.content).toContain("(MCP server 'files')");
    }
    // MCP's schema makes a missing content an empty one, and a missing isError false.
    expect(of({ structuredContent: { n: 1 } })).toMatchObject({ isError: false, structuredContent: { n: 1 } });
    expect(of({})).toMatchObject({ isError: false, content: '' });
  });

  it("keeps a 2024-10-07 server's toolResult: an object as structured content, anything else as its text", () => {
    const structured = of({ toolResult: { x: 1 } });
    expect(structured).toMatchObject({ isError: false, content: '{"x":1}', structuredContent: { x: 1 } });
    // Its text is a plain text block: no `blocks` (an empty list there would say there is no text), and /mcp shows the text.
    expect(structured.blocks ?? []).toEqual([]);
    expect(structured).not.toHaveProperty('blocks', []);
    expect(of({ toolResult: 'hello legacy' })).toMatchObject({ isError: false, content: 'hello legacy' });
    expect(of({ toolResult: [1, 'two'] })).toMatchObject({ isError: false, content: '[1,"two"]' });
    expect(of({ toolResult: null })).toMatchObject({ isError: false, content: 'null' });
    // A result with content is read as such, whatever else it carries.
    expect(of({ content: [{ type: 'text', text: 'new' }], toolResult: 'old' })).toMatchObject({ content: 'new' });
  });
});
