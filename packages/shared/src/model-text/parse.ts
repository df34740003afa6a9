import { randomUUID } from 'node:crypto';
import { MalformedToolBlockError } from '../errors/errors.js';
import { isJsonObject, jsonTypeOf } from '../schema/json-schema.js';
import { ToolCallId, ToolName, type ToolCall } from '../tools/call.js';

/** The info string that marks a fenced block as a tool call. */
export const TOOL_CALL_FENCE = 'tool_call';

/** What {@link parseToolCalls} found in a model's text. */
export interface ParsedModelText {
  /** Well-formed tool calls, in the order they appear. */
  readonly calls: ToolCall[];
  /** One error per malformed `tool_call` block, with its line and column. */
  readonly errors: MalformedToolBlockError[];
}

export interface ParseOptions {
  /** Makes an id for a block that carries none. @defaultValue `call_<uuid>` */
  readonly newId?: (index: number) => string;
}

interface OpenFence {
  readonly char: '`' | '~';
  readonly length: number;
  readonly isToolCall: boolean;
  readonly line: number;
  readonly column: number;
  readonly offset: number;
  readonly body: string[];
}

// CommonMark fences: up to three spaces of indent, three or more backticks or
// tildes; a backtick fence's info string may not contain a backtick.
const OPENING = /^( {0,3})(`{3,}|~{3,})(.*)$/;

/**
 * Extracts tool calls written as fenced blocks:
 *
 * ````text
 * ```tool_call
 * {"name": "search", "arguments": {"q": "forge"}}
 * ```
 * ````
 *
 * Other fenced blocks (code samples, including a `tool_call` block quoted
 * inside a longer fence) are left alone. A malformed `tool_call` block is
 * reported with its position and does not stop the blocks after it.
 */
export function parseToolCalls(text: string, options: ParseOptions = {}): ParsedModelText {
  const newId = options.newId ?? (() => `call_${randomUUID()}`);
  const calls: ToolCall[] = [];
  const errors: MalformedToolBlockError[] = [];
  let open: OpenFence | undefined;
  let offset = 0;
  const lines = text.split('\n');

  for (let i = 0; i < lines.length; i++) {
    const line = (lines[i] ?? '').replace(/\r$/, '');
    const lineOffset = offset;
    offset += (lines[i] ?? '').length + 1;

    if (open !== undefined) {
      const closing = new RegExp(`^ {0,3}${open.char === '`' ? '`' : '~'}{${open.length},}[ \\t]*$`);
      if (closing.test(line)) {
        if (open.isToolCall) readBlock(open, calls, errors, newId);
        open = undefined;
      } else {
        open.body.push(line);
      }
      continue;
    }
    const match = OPENING.exec(line);
    if (match === null) continue;
    const [, indent = '', fence = '', info = ''] = match;
    const char = fence[0] === '~' ? '~' : '`';
    if (char === '`' && info.includes('`')) continue; // inline code, not a fence
    const language = info.trim().split(/\s+/)[0] ?? '';
    open = { char, length: fence.length, isToolCall: language === TOOL_CALL_FENCE, line: i + 1, column: indent.length + 1, offset: lineOffset + indent.length, body: [] };
  }
  if (open?.isToolCall) {
    errors.push(blockError(open, `the block is never closed; end it with a line of ${open.length} ${open.char === '`' ? 'backticks' : 'tildes'}`));
  }
  return { calls, errors };
}

function blockError(block: OpenFence, reason: string): MalformedToolBlockError {
  return new MalformedToolBlockError({ line: block.line, column: block.column, offset: block.offset, reason });
}

function readBlock(block: OpenFence, calls: ToolCall[], errors: MalformedToolBlockError[], newId: (index: number) => string): void {
  const source = block.body.join('\n').trim();
  if (source === '') {
    errors.push(blockError(block, 'the block is empty'));
    return;
  }
  let body: unknown;
  try {
    body = JSON.parse(source);
  } catch (error) {
    errors.push(blockError(block, `the body is not valid JSON (${error instanceof Error ? error.message : String(error)})`));
    return;
  }
  if (!isJsonObject(body)) {
    errors.push(blockError(block, `the body must be a JSON object, got ${jsonTypeOf(body)}`));
    return;
  }
  const name = ToolName.safeParse(body.name);
  if (!name.success) {
    errors.push(blockError(block, body.name === undefined ? 'the "name" field is missing' : `"name" ${name.error.issues[0]?.message ?? 'is invalid'}`));
    return;
  }
  let args: unknown = body.arguments ?? {};
  // Some models send arguments as a JSON-encoded string, as in OpenAI's function calling.
  if (typeof args === 'string') {
    try {
      args = JSON.parse(args);
    } catch {
      // reported below as a non-object
    }
  }
  if (!isJsonObject(args)) {
    errors.push(blockError(block, `"arguments" must be a JSON object, got ${jsonTypeOf(args)}`));
    return;
  }
  let id: string;
  if (body.id === undefined) {
    id = newId(calls.length);
  } else {
    const parsedId = ToolCallId.safeParse(body.id);
    if (!parsedId.success) {
      errors.push(blockError(block, `"id" ${parsedId.error.issues[0]?.message ?? 'is invalid'}`));
      return;
    }
    id = parsedId.data;
  }
  calls.push({ id, name: name.data, arguments: args });
}
