import { ExecutionFailedError, ResourceLimitError } from '../errors/errors.js';
import { isJsonObject } from '../schema/json-schema.js';
import type { ToolResult } from './call.js';
import { ContentBlock, textOfBlocks } from './content-blocks.js';
import { MAX_RESULT_DEPTH, pathIn, resultPartJson, resultTooDeep, tooDeepAt } from './result-depth.js';

/**
 * Recognised by a registered symbol, not `instanceof`: a tools module may be
 * bundled with its own copy of this package (the sandbox bundles one), and
 * both copies must agree on what a handler returned. A symbol key never
 * survives JSON, so no data a handler passes on (arguments, a fetched body)
 * can be taken for one.
 */
const TOOL_CONTENT: unique symbol = Symbol.for('forge.ToolContent');

/** A handler's result given as MCP content blocks; made by {@link toolContent}. */
export interface ToolContent {
  readonly [TOOL_CONTENT]: true;
  /** Checked with {@link ContentBlock} when the result is built, not here: this object may come from anywhere. */
  readonly blocks: readonly unknown[];
  readonly structuredContent?: Readonly<Record<string, unknown>>;
}

/** What {@link toolContent} takes besides the blocks. */
export interface ToolContentOptions {
  /** The result's `structuredContent` (what an `outputSchema` is checked against): a JSON object. */
  readonly structuredContent?: Readonly<Record<string, unknown>>;
}

/**
 * What a handler returns to answer with MCP content blocks (images, audio,
 * resource links, embedded resources, and text) instead of plain text or
 * JSON. The blocks reach every caller in order, exactly as given; `content`
 * is their text blocks' text, for clients that read only text.
 *
 * @example
 * handler: () => toolContent([{ type: 'text', text: 'the chart' }, { type: 'image', data: png.toString('base64'), mimeType: 'image/png' }])
 */
export function toolContent(blocks: readonly ContentBlock[], options: ToolContentOptions = {}): ToolContent {
  return Object.freeze({
    [TOOL_CONTENT]: true as const,
    blocks,
    ...(options.structuredContent === undefined ? {} : { structuredContent: options.structuredContent }),
  });
}

/** Whether a handler's output is a {@link toolContent}. */
export function isToolContent(value: unknown): value is ToolContent {
  return typeof value === 'object' && value !== null && (value as { [TOOL_CONTENT]?: unknown })[TOOL_CONTENT] === true;
}

/** The parts of a result that its blocks decide. */
export interface BlocksResult {
  readonly content: string;
  /** Absent when the blocks are one plain text block: `content` says it all (today's shape). */
  readonly blocks?: ContentBlock[];
  readonly structuredContent?: Record<string, unknown>;
}

/**
 * A JSON copy: what the wire would carry, detached from the handler's objects.
 * It nests no deeper than a result may ({@link MAX_RESULT_DEPTH}): every hop
 * after this one writes it as JSON again, with less stack to spare.
 */
function jsonCopy(value: unknown, what: 'content blocks' | 'structuredContent', toolName: string): unknown {
  const root = what === 'content blocks' ? 'blocks' : 'structuredContent';
  const notJson = (error: unknown): ExecutionFailedError =>
    new ExecutionFailedError(toolName, `its ${what} cannot be sent as JSON (${error instanceof Error ? error.message : String(error)})`, { cause: error });
  let text: string | undefined;
  try {
    text = resultPartJson(toolName, value, root);
  } catch (error) {
    if (error instanceof ResourceLimitError) throw error;
    throw notJson(error);
  }
  if (text === undefined) throw notJson(new TypeError('not a JSON value'));
  const copy = JSON.parse(text) as unknown;
  const deep = tooDeepAt(copy, MAX_RESULT_DEPTH - 1);
  if (deep !== undefined) throw resultTooDeep(toolName, pathIn(root, copy, deep));
  return copy;
}

/**
 * Checks untrusted content blocks (a handler's, an MCP server's) and builds
 * the result fields they make. Each block must be a valid MCP content block;
 * fields beyond what is checked (`annotations`, `_meta`…) are kept.
 *
 * @throws ExecutionFailedError naming the first invalid block, its index and the field at fault.
 */
export function blocksResult(toolName: string, blocks: unknown, structuredContent?: unknown): BlocksResult {
  const copy = jsonCopy(blocks, 'content blocks', toolName);
  if (!Array.isArray(copy)) throw new ExecutionFailedError(toolName, 'its content blocks are not an array');
  const checked: ContentBlock[] = [];
  for (const [index, block] of copy.entries()) {
    const parsed = ContentBlock.safeParse(block);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      const type = isJsonObject(block) && typeof block.type === 'string' ? ` (${block.type.slice(0, 40)})` : '';
      const at = issue === undefined || issue.path.length === 0 ? '' : ` at '${issue.path.join('.')}'`;
      throw new ExecutionFailedError(toolName, `content block ${index}${type} is not a valid MCP content block${at}: ${issue?.message ?? 'invalid'}`, {
        details: { blockIndex: index },
      });
    }
    checked.push(parsed.data);
  }
  const structured = structuredContent === undefined ? undefined : jsonCopy(structuredContent, 'structuredContent', toolName);
  if (structured !== undefined && !isJsonObject(structured)) throw new ExecutionFailedError(toolName, 'its structuredContent is not a JSON object');
  const [only] = checked;
  const plain = checked.length === 1 && only?.type === 'text' && Object.keys(only).length === 2;
  return {
    content: textOfBlocks(checked),
    ...(plain ? {} : { blocks: checked }),
    ...(structured === undefined ? {} : { structuredContent: structured }),
  };
}

/**
 * Every content block of a result, in order: its `blocks`, or — for a result
 * in today's shape (text only, and every result recorded before blocks
 * existed) — one text block of its `content`.
 */
export function blocksOfResult(result: Pick<ToolResult, 'content' | 'blocks'>): ContentBlock[] {
  return result.blocks ?? [{ type: 'text', text: result.content }];
}
