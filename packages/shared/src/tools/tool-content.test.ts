import { describe, expect, it } from 'vitest';
import { isFleetError } from '../errors/fleet-error.js';
import { runExecutor } from '../pipeline/run.js';
import { ToolResult, type ToolCall } from './call.js';
import type { ContentBlock } from './content-blocks.js';
import { parseToolDefinition } from './definition.js';
import { FnToolExecutor, resultFromOutput } from './executor.js';
import { blocksOfResult, blocksResult, isToolContent, toolContent } from './tool-content.js';

const call: ToolCall = { id: 'c1', name: 'draw', arguments: {} };

const PNG = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]).toString('base64');
const EVERY_KIND: ContentBlock[] = [
  { type: 'text', text: 'a chart' },
  { type: 'image', data: PNG, mimeType: 'image/png', annotations: { audience: ['user'] } },
  { type: 'audio', data: 'UklGRg==', mimeType: 'audio/wav' },
  { type: 'resource_link', uri: 'file:///tmp/chart.csv', name: 'chart.csv', mimeType: 'text/csv' },
  { type: 'text', text: 'and its data' },
  { type: 'resource', resource: { uri: 'mem://notes', text: 'notes', mimeType: 'text/plain' } },
  { type: 'resource', resource: { uri: 'mem://raw', blob: 'AAEC' }, _meta: { 'x/y': 1 } },
];

function thrown(f: () => unknown): unknown {
  try {
    f();
  } catch (error) {
    return error;
  }
  throw new Error('expected a throw');
}

describe('toolContent', () => {
  it('is recognised by its brand, which no JSON value carries', () => {
    const marked = toolContent(EVERY_KIND);
    expect(isToolContent(marked)).toBe(true);
    expect(isToolContent(JSON.parse(JSON.stringify(marked)))).toBe(false);
    expect(isToolContent({ blocks: EVERY_KIND })).toBe(false);
    expect(isToolContent(null)).toBe(false);
    expect(Object.isFrozen(marked)).toBe(true);
  });

  it('is recognised when made by another copy of this package (the brand is a registered symbol)', () => {
    const foreign = { [Symbol.for('forge.ToolContent')]: true, blocks: [{ type: 'text', text: 'x' }, { type: 'image', data: PNG, mimeType: 'image/png' }] };
    expect(resultFromOutput(call, foreign).blocks).toHaveLength(2);
  });
});

describe('a handler returning content blocks', () => {
  it('keeps every block in order, as given, with the text blocks as content', () => {
    const result = resultFromOutput(call, toolContent(EVERY_KIND));
    expect(result).toEqual({ toolCallId: 'c1', name: 'draw', isError: false, content: 'a chart\nand its data', blocks: EVERY_KIND });
    // What the wire carries: the same result after a JSON round trip and the schema every reader uses.
    expect(ToolResult.parse(JSON.parse(JSON.stringify(result)))).toEqual(result);
  });

  it('carries structuredContent beside the blocks', () => {
    const result = resultFromOutput(call, toolContent(EVERY_KIND.slice(0, 2), { structuredContent: { points: 3 } }));
    expect(result.structuredContent).toEqual({ points: 3 });
    expect(result.blocks).toHaveLength(2);
  });

  it('leaves blocks out when they are one plain text block: the hot path keeps its shape', () => {
    expect(resultFromOutput(call, toolContent([{ type: 'text', text: 'just this' }]))).toEqual({ toolCallId: 'c1', name: 'draw', isError: false, content: 'just this' });
    // Anything more than that is kept, so MCP clients get exactly what the tool gave.
    expect(resultFromOutput(call, toolContent([{ type: 'text', text: 'a' }, { type: 'text', text: 'b' }])).blocks).toHaveLength(2);
    expect(resultFromOutput(call, toolContent([{ type: 'text', text: 'a', annotations: { priority: 1 } }])).blocks).toHaveLength(1);
    expect(resultFromOutput(call, toolContent([]))).toMatchObject({ content: '', blocks: [] });
  });

  it('copies the blocks: a handler changing its objects afterwards changes nothing', () => {
    const image = { type: 'image' as const, data: PNG, mimeType: 'image/png' };
    const result = resultFromOutput(call, toolContent([image]));
    image.data = 'AAAA';
    expect(result.blocks?.[0]).toMatchObject({ data: PNG });
  });

  it.each([
    ['an unknown type', [{ type: 'video', data: PNG }], "content block 0 (video) is not a valid MCP content block at 'type'"],
    ['data that is not base64', [{ type: 'text', text: 'ok' }, { type: 'image', data: 'not base64!', mimeType: 'image/png' }], "content block 1 (image) is not a valid MCP content block at 'data': must be base64"],
    ['a missing mimeType', [{ type: 'audio', data: PNG }], "content block 0 (audio) is not a valid MCP content block at 'mimeType'"],
    ['a resource with neither text nor blob', [{ type: 'resource', resource: { uri: 'x://y' } }], 'content block 0 (resource) is not a valid MCP content block'],
    ['a block that is not an object', ['text'], 'content block 0 is not a valid MCP content block'],
  ])('fails EXECUTION_FAILED for %s, naming the block', (_what, blocks, message) => {
    const error = thrown(() => resultFromOutput(call, toolContent(blocks as ContentBlock[])));
    expect(isFleetError(error) && error.code).toBe('EXECUTION_FAILED');
    expect((error as Error).message).toContain(message);
  });

  it.each([300, 10_000])('fails RESOURCE_LIMIT for blocks or structuredContent nested %i levels deep, naming where', (depth) => {
    // 300 levels JSON.stringify writes here, 10,000 it cannot: one rule for both, not a stack overflow's message.
    const nested = JSON.parse(`${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`) as Record<string, unknown>;
    const inStructure = thrown(() => resultFromOutput(call, toolContent([], { structuredContent: nested })));
    expect(isFleetError(inStructure) && inStructure.code).toBe('RESOURCE_LIMIT');
    expect((inStructure as Error).message).toContain("nests deeper than 256 levels at 'structuredContent.a.a.a");
    const inBlock = thrown(() => resultFromOutput(call, toolContent([{ type: 'text', text: 'x', _meta: nested }])));
    expect(isFleetError(inBlock) && inBlock.code).toBe('RESOURCE_LIMIT');
    expect((inBlock as Error).message).toContain("at 'blocks[0]._meta.a.a");
  });

  it('fails EXECUTION_FAILED for blocks or structuredContent that are not JSON', () => {
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    expect((thrown(() => resultFromOutput(call, toolContent([], { structuredContent: cyclic }))) as Error).message).toContain('cannot be sent as JSON');
    expect((thrown(() => resultFromOutput(call, { [Symbol.for('forge.ToolContent')]: true, blocks: 'text' })) as Error).message).toContain('not an array');
    expect((thrown(() => blocksResult('draw', [], [1, 2])) as Error).message).toContain('structuredContent is not a JSON object');
  });

  it('an invalid block ends a run as a typed error result, never a throw', async () => {
    const definition = parseToolDefinition({ name: 'draw', tier: 'platform' });
    const executor = new FnToolExecutor('draw', () => toolContent([{ type: 'image', data: '***', mimeType: 'image/png' }]));
    const result = await runExecutor(executor, definition, call);
    expect(result).toMatchObject({ isError: true, error: { code: 'EXECUTION_FAILED' } });
    expect(result.blocks).toBeUndefined();
  });

  it('an outputSchema is checked against the structuredContent given with the blocks', async () => {
    const definition = parseToolDefinition({ name: 'draw', tier: 'platform', outputSchema: { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] } });
    const ok = await runExecutor(new FnToolExecutor('draw', () => toolContent(EVERY_KIND, { structuredContent: { n: 1 } })), definition, call);
    expect(ok).toMatchObject({ isError: false, structuredContent: { n: 1 }, blocks: EVERY_KIND });
    const missing = await runExecutor(new FnToolExecutor('draw', () => toolContent(EVERY_KIND)), definition, call);
    expect(missing.error?.code).toBe('OUTPUT_VALIDATION');
  });
});

describe('blocksOfResult', () => {
  it('reads a text-only (or old) result as one text block, and a result with blocks as its blocks', () => {
    expect(blocksOfResult({ content: 'hello' })).toEqual([{ type: 'text', text: 'hello' }]);
    expect(blocksOfResult({ content: 'a chart\nand its data', blocks: EVERY_KIND })).toBe(EVERY_KIND);
  });
});
