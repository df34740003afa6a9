import type { ContentBlock, ToolResult } from '@forge-fleet/shared';
import { describe, expect, it } from 'vitest';
import { toCallToolResult } from './call-results.js';

describe('a fleet result as an MCP CallToolResult', () => {
  it('gives a text-only result (and every result recorded before blocks) as one text block', () => {
    const result: ToolResult = { toolCallId: 'c', name: 'echo', content: 'hi', isError: false, structuredContent: { n: 1 } };
    expect(toCallToolResult(result)).toMatchObject({ content: [{ type: 'text', text: 'hi' }], structuredContent: { n: 1 }, isError: false });
  });

  it('gives the blocks exactly as the tool gave them, extra fields included, beside structuredContent', () => {
    const blocks: ContentBlock[] = [
      { type: 'text', text: 'a', annotations: { priority: 1 } },
      { type: 'image', data: 'AAAA', mimeType: 'image/png', _meta: { 'x/y': true } },
      { type: 'resource', resource: { uri: 'mem://raw', blob: 'AAEC', mimeType: 'application/octet-stream' } },
    ];
    const mcp = toCallToolResult({ toolCallId: 'c', name: 'draw', content: 'a', isError: false, structuredContent: { n: 1 }, blocks });
    expect(mcp.content).toEqual(blocks);
    expect(mcp.structuredContent).toEqual({ n: 1 });
  });
});
