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
});
