import { parseToolDefinition, type PendingApproval, type ToolResult } from '@forge-fleet/shared';
import { describe, expect, it } from 'vitest';
import { ARGUMENTS_WIDTH, approvalsTable, argumentsText, blockLine, formatDuration, printable, queuesTable, relativeTime, resultText, table, toolsTable, truncate } from './output.js';

describe('tables', () => {
  it('aligns columns on the widest cell, two spaces apart, with no trailing spaces and `-` for empty cells', () => {
    expect(table(['A', 'LONGER', 'C'], [['xyz', '', 'last'], ['1', '22', '']]).split('\n')).toEqual([
      'A    LONGER  C', //
      'xyz  -       last',
      '1    22      -',
    ]);
  });

  it('makes fleet text printable: no escape sequence or newline reaches the terminal', () => {
    expect(printable('ok\u001b[2J\nnext\u009b1m')).toBe('ok [2J next 1m');
    expect(table(['NAME'], [['a\u001b]0;pwned\u0007b']]).split('\n')).toEqual(['NAME', 'a ]0;pwned b']);
  });

  it('cuts long text with an ellipsis', () => {
    expect(truncate('abcdef', 4)).toBe('abc…');
    expect(truncate('abc', 4)).toBe('abc');
  });
});

describe('times', () => {
  it('formats durations in seconds, minutes and hours', () => {
    expect([0, 999, 42_000, 185_000, 7_620_000].map(formatDuration)).toEqual(['0s', '0s', '42s', '3m05s', '2h07m']);
  });

  it('gives deadlines relative to now, future and past', () => {
    const now = 1_000_000;
    expect(relativeTime(now + 14 * 60_000, now)).toBe('in 14m00s');
    expect(relativeTime(now - 130_000, now)).toBe('2m10s ago');
    expect(relativeTime(now + 300, now)).toBe('now');
  });
});

describe('command tables', () => {
  it('lists tools with tier, pool, flags and the first part of the description', () => {
    const tools = [
      parseToolDefinition({ name: 'refund', tier: 'host', pool: 'payments', retryable: true, requiresConfirmation: true, description: `Refunds.\n${'x'.repeat(100)}` }),
      parseToolDefinition({ name: 'clock', tier: 'platform', speculatable: true }),
    ];
    const [header, refund, clock] = toolsTable(tools).split('\n');
    expect(header).toMatch(/^NAME\s+TIER\s+POOL\s+FLAGS\s+DESCRIPTION$/);
    expect(refund).toMatch(/^refund\s+host\s+payments\s+retryable,requiresConfirmation\s+Refunds\. x+…$/);
    expect(refund!.length).toBeLessThan(140);
    expect(clock).toMatch(/^clock\s+platform\s+-\s+speculatable\s+-$/);
    expect(toolsTable([])).toMatch(/no tools/);
  });

  it('lists pending approvals with relative deadlines', () => {
    const now = Date.UTC(2026, 10, 30, 8);
    const pending: PendingApproval = { id: 'c-42', tool: 'refund', arguments: { amount: 120 }, caller: 'agent-7', scope: 'billing', reason: 'needs a person', deadline: now + 600_000, createdAt: now - 1000 };
    const [header, row] = approvalsTable([pending, { ...pending, id: 'c-43', caller: undefined, deadline: now - 5000 }], now).split('\n').slice(0, 2);
    expect(header).toMatch(/^ID\s+TOOL\s+ARGUMENTS\s+CALLER\s+SCOPE\s+REASON\s+DEADLINE$/);
    expect(row).toMatch(/^c-42\s+refund\s+\{"amount":120\}\s+agent-7\s+billing\s+needs a person\s+in 10m00s$/);
    expect(approvalsTable([{ ...pending, caller: undefined, deadline: now - 5000 }], now).split('\n')[1]).toMatch(/^c-42\s+refund\s+\{"amount":120\}\s+-\s+billing\s+needs a person\s+5s ago$/);
    expect(approvalsTable([], now)).toBe('no calls are waiting for approval');
  });

  it('shows a waiting call\'s arguments as compact JSON on one line, cut to a width, with no control character', () => {
    expect(argumentsText({ amount: 120, note: 'two\nlines' })).toBe('{"amount":120,"note":"two\\nlines"}');
    expect(argumentsText({})).toBe('{}');
    const long = argumentsText({ text: 'x'.repeat(500) });
    expect(long).toHaveLength(ARGUMENTS_WIDTH);
    expect(long).toMatch(/^\{"text":"x+…$/);
    // A string that JSON leaves as it is (C1 controls, DEL) still cannot drive the terminal.
    expect(argumentsText({ t: 'a\u009b2Jb\u007f' })).toBe('{"t":"a 2Jb "}');
    const [, row] = approvalsTable([{ id: 'c-1', tool: 't', arguments: { text: 'y'.repeat(500) }, scope: 's', reason: 'r', deadline: 0, createdAt: 0 }], 0).split('\n');
    expect(row).toContain(`{"text":"${'y'.repeat(ARGUMENTS_WIDTH - 10)}…`);
  });

  it('lists queues with their counts and live workers', () => {
    const lines = queuesTable([
      { lane: 'host.payments', tier: 'host', pool: 'payments', queue: '{forge.host.payments}.tools', tools: ['refund', 'charge'], waiting: 3, active: 1, delayed: 0, failed: 2, workers: 4, calls: { waiting: 130, active: 9 } },
    ]).split('\n');
    expect(lines[0]).toMatch(/^LANE\s+QUEUE\s+WAITING\s+ACTIVE\s+DELAYED\s+FAILED\s+WORKERS\s+CALLS WAITING\s+CALLS ACTIVE\s+TOOLS$/);
    expect(lines[1]).toMatch(/^host\.payments\s+\{forge\.host\.payments\}\.tools\s+3\s+1\s+0\s+2\s+4\s+130\s+9\s+refund,charge$/);
    expect(queuesTable([])).toMatch(/no queues/);
  });

  it("marks a worker's own queue, whose worker its pack's line counts already", () => {
    const [, row] = queuesTable([{ lane: 'host', tier: 'host', queue: '{forge.host}.p1.w0123456789abcdef', tools: ['memory.read_graph'], waiting: 0, active: 1, delayed: 0, failed: 0, workers: 1, direct: true }]).split('\n');
    expect(row).toMatch(/\s0\s+1\s+0\s+0\s+\(1, own\)\s+-\s+-\s+memory\.read_graph$/);
  });

  it('prints a result as its structured content, pretty JSON, else its text', () => {
    const result: ToolResult = { toolCallId: 'c', name: 'echo', content: '{"n":1}', isError: false, structuredContent: { n: 1 } };
    expect(resultText(result)).toBe('{\n  "n": 1\n}');
    expect(resultText({ ...result, content: 'plain text', structuredContent: undefined })).toBe('plain text');
  });

  it('prints the structured content as pretty JSON when the result also has content blocks: it is the machine-readable result', () => {
    const result: ToolResult = {
      toolCallId: 'c',
      name: 'draw',
      content: 'a chart',
      isError: false,
      structuredContent: { n: 1 },
      blocks: [
        { type: 'text', text: 'a chart' },
        { type: 'image', data: 'AAAA', mimeType: 'image/png' },
      ],
    };
    expect(resultText(result)).toBe('{\n  "n": 1\n}');
  });

  it('prints content blocks one per line when there is no structured content: text as it is, other blocks as a short line with their size', () => {
    const png = Buffer.alloc(1234, 7).toString('base64');
    const result: ToolResult = {
      toolCallId: 'c',
      name: 'draw',
      content: 'a chart\nits data',
      isError: false,
      blocks: [
        { type: 'text', text: 'a chart' },
        { type: 'image', data: png, mimeType: 'image/png' },
        { type: 'audio', data: 'UklGRg==', mimeType: 'audio/wav' },
        { type: 'resource_link', uri: 'file:///tmp/a.csv', name: 'a.csv', mimeType: 'text/csv' },
        { type: 'resource', resource: { uri: 'mem://notes', text: 'héllo', mimeType: 'text/plain' } },
        { type: 'resource', resource: { uri: 'mem://raw', blob: 'AAEC' } },
        { type: 'text', text: 'its data' },
      ],
    };
    expect(resultText(result).split('\n')).toEqual([
      'a chart',
      '[image image/png, 1234 bytes]',
      '[audio audio/wav, 4 bytes]',
      '[resource_link file:///tmp/a.csv text/csv, a.csv]',
      '[resource mem://notes text/plain, 6 bytes of text]',
      '[resource mem://raw, 3 bytes]',
      'its data',
    ]);
  });

  it("keeps a tool's escape sequences out of the bracketed lines", () => {
    expect(blockLine({ type: 'image', data: 'AAAA', mimeType: 'image/png\u001b[2J' })).toBe('[image image/png [2J, 3 bytes]');
  });
});
