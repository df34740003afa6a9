/**
 * The MCP points' part of a benchmark run's results: medians over the
 * repetitions, a table like run.ts's, and the issue's bars as checks.
 */
import type { McpSample } from './measure.js';
import { type McpArm, MCP_POINTS } from './points.js';
import { MCP_KINDS } from './process-kinds.js';

export interface McpSummary {
  readonly point: string;
  readonly arm: McpArm;
  readonly median: McpSample;
  readonly spread: { callsPerSec: [number, number]; p50: [number, number]; p99: [number, number] };
  readonly reps: McpSample[];
}

/** A check in the shape run.ts writes its own: what the fleet measured, the bar, and whether it was met. */
export interface McpCheck {
  readonly target: string;
  readonly fleet: number;
  readonly bar: number;
  readonly met: boolean;
}

const median = (xs: readonly number[]): number => {
  const s = [...xs].filter((x) => !Number.isNaN(x)).sort((a, b) => a - b);
  return s.length === 0 ? Number.NaN : s.length % 2 === 1 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

export function summariseMcp(point: string, arm: McpArm, reps: McpSample[]): McpSummary {
  const m = (f: (s: McpSample) => number): number => median(reps.map(f));
  const range = (f: (s: McpSample) => number): [number, number] => [Math.min(...reps.map(f)), Math.max(...reps.map(f))];
  const byKind = (f: (s: McpSample) => Record<string, number>) => Object.fromEntries(MCP_KINDS.map((k) => [k, m((s) => f(s)[k]!)])) as McpSample['peakRssMb'];
  return {
    point,
    arm,
    reps,
    median: {
      callsPerSec: m((s) => s.callsPerSec),
      p50: m((s) => s.p50),
      p95: m((s) => s.p95),
      p99: m((s) => s.p99),
      errors: m((s) => s.errors),
      cpuMsPerCall: { ...byKind((s) => s.cpuMsPerCall), total: m((s) => s.cpuMsPerCall.total) },
      redisCmdsPerCall: m((s) => s.redisCmdsPerCall),
      peakRssMb: byKind((s) => s.peakRssMb),
      serverProcesses: m((s) => s.serverProcesses),
    },
    spread: { callsPerSec: range((s) => s.callsPerSec), p50: range((s) => s.p50), p99: range((s) => s.p99) },
  };
}

const f = (n: number, digits = 2): string => (Number.isNaN(n) ? '–' : n.toFixed(digits));

/** Markdown rows of the MCP points; a kind no process of the arm has shows as –. */
export function mcpTable(summaries: readonly McpSummary[]): string {
  const rows = [
    '| point | arm | calls/s (min–max) | p50 ms | p95 ms | p99 ms | CPU ms/call agent · gateway · disp · worker · server · redis = total | Redis cmds/call | peak RSS MB agent · gateway · disp · worker · server | server processes |',
    '|---|---|---|---|---|---|---|---|---|---|',
  ];
  for (const s of summaries) {
    const m = s.median;
    const c = m.cpuMsPerCall;
    const r = m.peakRssMb;
    const mb = (n: number): string => (n === 0 ? '–' : f(n, 0));
    rows.push(
      `| ${s.point} | ${s.arm} | ${f(m.callsPerSec, 0)} (${f(s.spread.callsPerSec[0], 0)}–${f(s.spread.callsPerSec[1], 0)}) | ${f(m.p50)} | ${f(m.p95)} | ${f(m.p99)} | ${f(c.agent, 3)} · ${f(c.gateway, 3)} · ${f(c.dispatcher, 3)} · ${f(c.worker, 3)} · ${f(c.server, 3)} · ${f(c.redis, 3)} = ${f(c.total, 3)} | ${f(m.redisCmdsPerCall, 1)} | ${mb(r.agent)} · ${mb(r.gateway)} · ${mb(r.dispatcher)} · ${mb(r.worker)} · ${mb(r.server)} | ${f(m.serverProcesses, 0)} |`,
    );
  }
  return rows.join('\n');
}

/**
 * Issue #16's bars, each where the run measured both sides: at 256 in flight
 * the fleet ≥ 5× mcp-proxy's calls/s, its p99 under a tenth of mcp-proxy's,
 * ≥ 0.6× direct stdio; at 1 in flight its p50 at most 3 ms above direct's;
 * and calls/s of the CPU-bound call rising with a second worker.
 */
export function mcpChecks(summaries: readonly McpSummary[]): McpCheck[] {
  const get = (point: string, arm: McpArm): McpSample | undefined => summaries.find((s) => s.point === point && s.arm === arm)?.median;
  const out: McpCheck[] = [];
  const add = (target: string, fleet: number, bar: number, met: (fleet: number, bar: number) => boolean): void => void out.push({ target, fleet, bar, met: met(fleet, bar) });
  const fleet256 = get('mcp-256', 'mcp-fleet');
  const proxy256 = get('mcp-256', 'mcp-proxy');
  const direct256 = get('mcp-256', 'mcp-direct');
  const fleet1 = get('mcp-1', 'mcp-fleet');
  const direct1 = get('mcp-1', 'mcp-direct');
  const scale1 = get('mcp-scale', 'mcp-fleet');
  const scale2 = get('mcp-scale', 'mcp-fleet-x2');
  const atLeast = (a: number, b: number): boolean => a >= b;
  const below = (a: number, b: number): boolean => a < b;
  if (fleet256 !== undefined && proxy256 !== undefined) {
    add('MCP echo calls/s at 256 in flight ≥ 5 × mcp-proxy', fleet256.callsPerSec, 5 * proxy256.callsPerSec, atLeast);
    add('MCP echo p99 at 256 in flight < mcp-proxy p99 / 10 (ms)', fleet256.p99, proxy256.p99 / 10, below);
  }
  if (fleet256 !== undefined && direct256 !== undefined) add('MCP echo calls/s at 256 in flight ≥ 0.6 × direct stdio', fleet256.callsPerSec, 0.6 * direct256.callsPerSec, atLeast);
  if (fleet1 !== undefined && direct1 !== undefined) add('MCP echo p50 at 1 in flight ≤ direct stdio + 3 ms', fleet1.p50, direct1.p50 + 3, (a, b) => a <= b);
  if (scale1 !== undefined && scale2 !== undefined) add('MCP CPU-bound calls/s, instances doubled on a 2nd worker > 1 worker', scale2.callsPerSec, scale1.callsPerSec, (a, b) => a > b);
  return out;
}

/** Every MCP point and arm, for a run's notes. */
export const MCP_DESCRIPTION = `MCP points (issue #16): server-everything's \`echo\` at ${MCP_POINTS.filter((p) => p.call === 'echo')
  .map((p) => p.inflight)
  .join(' and ')} in flight from one agent process (official SDK client) — \`mcp-direct\` spawns the server over stdio, \`mcp-proxy\` and \`mcp-supergateway\` (\`--stateful\`, \`--logLevel none\`) front it over Streamable HTTP, \`mcp-fleet\` calls \`everything.echo\` through a dispatcher and one host worker with 2 instances; \`mcp-scale\` calls \`gzip-file-as-resource\` on a 512 KB body (CPU-bound) with one worker of one instance against two such workers (\`mcp-fleet-x2\`). A server process is counted as \`server\` wherever it runs.`;
