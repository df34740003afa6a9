import { z } from 'zod';
import { WireError } from '../errors/wire.js';
import { ContentBlock } from './content-blocks.js';

/**
 * Tool names are 1–128 characters of `[A-Za-z0-9_.-]`: the same set MCP allows,
 * so every Forge Fleet tool can be offered over MCP unchanged.
 */
export const ToolName = z
  .string()
  .regex(/^[A-Za-z0-9_.-]{1,128}$/, 'must be 1-128 characters of letters, digits, "_", "." or "-"');
export type ToolName = z.infer<typeof ToolName>;

/** Call ids are chosen by the caller (for idempotency) or generated. */
export const ToolCallId = z
  .string()
  .regex(/^[A-Za-z0-9_.:-]{1,128}$/, 'must be 1-128 characters of letters, digits, "_", ".", ":" or "-"');
export type ToolCallId = z.infer<typeof ToolCallId>;

/** A request to run one tool with JSON arguments. */
export const ToolCall = z.object({
  id: ToolCallId,
  name: z.string().min(1),
  arguments: z.record(z.string(), z.unknown()),
});
export type ToolCall = z.infer<typeof ToolCall>;

/**
 * What a call produced. `content` is always text (what a model reads);
 * `structuredContent` is set when the handler returned a JSON object; `blocks`
 * holds every MCP content block (text, image, audio, resource links, embedded
 * resources) the tool gave, in order and as given, whenever they say more than
 * one plain text block would — `content` is then the text blocks' text (see
 * `blocksResult`, the one place that decides). Results without `blocks` are
 * today's shape: readers treat them as one text block of `content`. A failed
 * call is still a result (`isError: true`) and carries the typed `error`.
 */
export const ToolResult = z.object({
  toolCallId: z.string(),
  name: z.string(),
  content: z.string(),
  isError: z.boolean(),
  structuredContent: z.record(z.string(), z.unknown()).optional(),
  blocks: z.array(ContentBlock).optional(),
  error: WireError.optional(),
});
export type ToolResult = z.infer<typeof ToolResult>;
