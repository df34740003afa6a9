import type { TrustLevel } from '../scope/trust.js';
import type { Tier } from '../tiers/tier.js';
import type { ToolCall, ToolResult } from './call.js';
import type { ProgressUpdate } from './progress.js';
import { resultPartJson } from './result-depth.js';
import { blocksResult, isToolContent, type ToolContent } from './tool-content.js';

/** What a handler receives besides its arguments. */
export interface ToolContext {
  /** The call being run (after any modification by the approval step). */
  readonly call: ToolCall;
  /** Fires when the call is cancelled or its timeout passes; long handlers must honour it. */
  readonly signal: AbortSignal;
  readonly tier: Tier;
  /** 1 for the first run, 2 for the first retry… */
  readonly attempt: number;
  /** Environment variables of the active skill; never the worker's own environment. */
  readonly env: Readonly<Record<string, string>>;
  /** How far the active skill is trusted. */
  readonly trust: TrustLevel;
  /**
   * Reports how far the call has got; whoever waits for it (an MCP client's
   * progress notifications, `forge call --wait`, `GET /v1/calls/:id`) sees it.
   * Cheap to call often: reports leave the worker a few times a second at most.
   * @throws TypeError for a malformed report (not a finite `progress`, a non-positive `total`).
   */
  progress(update: ProgressUpdate): void;
}

/**
 * What a handler may return: text (what a model reads), a JSON object (kept as
 * `structuredContent`, with its JSON text as `content`), any other JSON value
 * (kept as JSON text), or MCP content blocks made with `toolContent` (kept as
 * `blocks`, with their text as `content`).
 */
export type HandlerOutput = string | number | boolean | null | undefined | readonly unknown[] | ToolContent | { readonly [key: string]: unknown };

/** A tool's implementation as a plain function. Throwing yields an error result, never a crash. */
export type ToolHandler = (args: Record<string, unknown>, ctx: ToolContext) => HandlerOutput | Promise<HandlerOutput>;

/**
 * Runs one tool. The executor receives a call that has already been scoped,
 * validated and approved: it must not make its own authorization decisions.
 */
export interface ToolExecutor {
  /** The name of the tool this executor serves. */
  readonly name: string;
  execute(call: ToolCall, ctx: ToolContext): Promise<ToolResult>;
}

/**
 * Builds the result for a handler's output (see {@link HandlerOutput}).
 *
 * @throws ExecutionFailedError for content blocks that are not valid MCP blocks, or not JSON.
 */
export function resultFromOutput(call: ToolCall, output: HandlerOutput): ToolResult {
  const base = { toolCallId: call.id, name: call.name, isError: false };
  if (typeof output === 'string') return { ...base, content: output };
  if (output === undefined) return { ...base, content: '' };
  // Blocks are checked here, where they enter: the trusted path (FnToolExecutor) checks nothing after.
  if (isToolContent(output)) return { ...base, ...blocksResult(call.name, output.blocks, output.structuredContent) };
  const content = resultPartJson(call.name, output, 'structuredContent');
  if (typeof output === 'object' && output !== null && !Array.isArray(output)) {
    return { ...base, content, structuredContent: JSON.parse(content) as Record<string, unknown> };
  }
  return { ...base, content };
}

/** Wraps a plain function as a {@link ToolExecutor}. */
export class FnToolExecutor implements ToolExecutor {
  constructor(
    readonly name: string,
    private readonly handler: ToolHandler,
  ) {}

  async execute(call: ToolCall, ctx: ToolContext): Promise<ToolResult> {
    return resultFromOutput(call, await this.handler(call.arguments, ctx));
  }
}
