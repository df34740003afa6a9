import type { ContentBlock, PendingApproval, QueueStats, ToolDefinition, ToolResult } from '@forge-fleet/shared';

/** Longest description `forge tools` shows (the whole text is in `--json`). */
export const DESCRIPTION_WIDTH = 60;

/** Longest arguments `forge approvals` shows, as compact JSON (the whole object is in `--json`). */
export const ARGUMENTS_WIDTH = 60;

// C0 and C1 control characters, DEL included: what a terminal may read as a command.
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/g;

/**
 * Text from the fleet (tool descriptions, approval reasons, progress
 * messages, error messages) made safe to print in a table or status line:
 * tools and agents write it, and an escape sequence in it must not drive the
 * operator's terminal. Control characters (newlines too) become spaces.
 */
export function printable(text: string): string {
  return text.replace(CONTROL, ' ');
}

/** Cuts `text` to `width` characters, marking the cut with `…`. */
export function truncate(text: string, width: number): string {
  return text.length <= width ? text : `${text.slice(0, Math.max(0, width - 1))}…`;
}

/**
 * Left-aligned columns separated by two spaces, headers first; no trailing
 * spaces. Cells are made {@link printable}; an empty one shows as `-`.
 */
export function table(headers: readonly string[], rows: readonly (readonly string[])[]): string {
  const cells = [headers, ...rows].map((row) => headers.map((_, i) => (row[i] === undefined || row[i] === '' ? '-' : printable(row[i]))));
  const widths = headers.map((_, i) => Math.max(...cells.map((row) => row[i]!.length)));
  return cells.map((row) => row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i]!))).join('  ').trimEnd()).join('\n');
}

/** `42s`, `3m05s`, `2h07m`: how long something has taken. */
export function formatDuration(ms: number): string {
  const seconds = Math.max(0, Math.floor(ms / 1000));
  if (seconds < 60) return `${seconds}s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes}m${String(seconds % 60).padStart(2, '0')}s`;
  return `${Math.floor(minutes / 60)}h${String(minutes % 60).padStart(2, '0')}m`;
}

/** `in 14m00s` / `2m10s ago`, from `now`. */
export function relativeTime(at: number, now: number): string {
  const delta = at - now;
  if (Math.abs(delta) < 1000) return 'now';
  return delta > 0 ? `in ${formatDuration(delta)}` : `${formatDuration(-delta)} ago`;
}

/** Pretty-printed JSON, as `--json` prints API answers. */
export function jsonText(value: unknown): string {
  return JSON.stringify(value, null, 2);
}

/** The flags of a tool that change how it may be called. */
function flagsOf(tool: ToolDefinition): string {
  return [tool.retryable && 'retryable', tool.speculatable && 'speculatable', tool.requiresConfirmation && 'requiresConfirmation'].filter(Boolean).join(',');
}

/** `forge tools`: one line per tool. */
export function toolsTable(tools: readonly ToolDefinition[]): string {
  if (tools.length === 0) return 'no tools: no live worker serves a tool this token may list';
  return table(
    ['NAME', 'TIER', 'POOL', 'FLAGS', 'DESCRIPTION'],
    tools.map((t) => [t.name, t.tier, t.pool ?? '', flagsOf(t), truncate(printable(t.description).trim(), DESCRIPTION_WIDTH)]),
  );
}

/**
 * A call's arguments on one line: compact JSON, made {@link printable} (an
 * escape sequence inside a string value is still text to the terminal), cut
 * to `width` with `…`.
 */
export function argumentsText(args: Readonly<Record<string, unknown>>, width = ARGUMENTS_WIDTH): string {
  return truncate(printable(JSON.stringify(args)), width);
}

/** `forge approvals`: one line per waiting call, with the arguments it would run with, deadlines relative to `now`. */
export function approvalsTable(approvals: readonly PendingApproval[], now: number): string {
  if (approvals.length === 0) return 'no calls are waiting for approval';
  return table(
    ['ID', 'TOOL', 'ARGUMENTS', 'CALLER', 'SCOPE', 'REASON', 'DEADLINE'],
    approvals.map((a) => [a.id, a.tool, argumentsText(a.arguments), a.caller ?? '', a.scope, a.reason, relativeTime(a.deadline, now)]),
  );
}

/**
 * `forge queues`: one line per tool pack's queue. Counts are jobs, then
 * calls: calls admitted together travel as one job, so under load a job may
 * stand for many calls.
 */
export function queuesTable(queues: readonly QueueStats[]): string {
  if (queues.length === 0) return 'no queues: no worker has announced tools yet';
  return table(
    ['LANE', 'QUEUE', 'WAITING', 'ACTIVE', 'DELAYED', 'FAILED', 'WORKERS', 'CALLS WAITING', 'CALLS ACTIVE', 'TOOLS'],
    queues.map((q) => [
      q.lane,
      q.queue,
      String(q.waiting),
      String(q.active),
      String(q.delayed),
      String(q.failed),
      // A worker's own queue is that worker again (counted in its pack's line).
      q.direct === true ? `(${q.workers}, own)` : String(q.workers),
      q.calls === undefined ? '' : String(q.calls.waiting),
      q.calls === undefined ? '' : String(q.calls.active),
      truncate((q.tools ?? []).join(','), 60),
    ]),
  );
}

/** Bytes of base64 data, decoded (what a person wants to know of an image, not its text). */
const decodedBytes = (data: string): number => Buffer.byteLength(data, 'base64');

/**
 * One content block as `forge call` prints it: a text block as its text, any
 * other as one short bracketed line (`[image image/png, 1234 bytes]`) — the
 * data itself is in `--json`. Names, URIs and types come from the tool and
 * are made {@link printable}.
 */
export function blockLine(block: ContentBlock): string {
  const p = (text: unknown): string => printable(String(text));
  switch (block.type) {
    case 'text':
      return block.text;
    case 'image':
    case 'audio':
      return `[${block.type} ${p(block.mimeType)}, ${decodedBytes(block.data)} bytes]`;
    case 'resource_link':
      return `[resource_link ${p(block.uri)}${typeof block.mimeType === 'string' ? ` ${p(block.mimeType)}` : ''}, ${p(block.name)}]`;
    case 'resource': {
      const r = block.resource;
      const type = typeof r.mimeType === 'string' ? ` ${p(r.mimeType)}` : '';
      const size = 'text' in r && typeof r.text === 'string' ? `${Buffer.byteLength(r.text)} bytes of text` : `${decodedBytes(String(r.blob))} bytes`;
      return `[resource ${p(r.uri)}${type}, ${size}]`;
    }
  }
}

/**
 * What a completed call printed: its structured content as pretty JSON when it
 * has some — the machine-readable result, what a script piping `forge call`
 * into `jq` wants, whatever blocks came with it — else its content blocks one
 * per line when the tool gave any besides plain text, else its text.
 */
export function resultText(result: ToolResult): string {
  if (result.structuredContent !== undefined) return jsonText(result.structuredContent);
  return result.blocks === undefined ? result.content : result.blocks.map(blockLine).join('\n');
}
