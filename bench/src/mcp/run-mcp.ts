/**
 * What run.ts needs of the MCP points, behind one object: the selection,
 * one sample at a time (so run.ts alternates them in its repetitions like
 * its own points), and the results' parts — summaries, checks, a table.
 */
import type { Redis } from 'ioredis';
import { type Spawned, spawnNode, until } from '../proc.js';
import type { WarmUp } from '../warm-up.js';
import { mcpFleetSecrets } from './fleet.js';
import { type McpContext, type McpSample, measureMcp, stopAll } from './measure.js';
import { type McpArm, type McpPoint, selectMcp } from './points.js';
import { MCP_DESCRIPTION, type McpCheck, mcpChecks, type McpSummary, mcpTable, summariseMcp } from './report.js';

/** Size of the scale point's gzip body: ~10 ms of one core per call. */
const BLOB_KB = 512;

export interface McpRun {
  readonly points: readonly McpPoint[];
  readonly armsOf: (point: McpPoint) => readonly McpArm[];
  /** Whether every MCP point and arm is selected (a run of fewer is partial). */
  readonly complete: boolean;
  measure(arm: McpArm, point: McpPoint): Promise<McpSample>;
  /** The summaries, checks and a Markdown section of the samples taken. */
  results(): { summaries: McpSummary[]; checks: McpCheck[]; markdown: string };
  stop(): Promise<void>;
}

export async function startMcpRun(options: { redisUrl: string; redisPid: number; redis: Redis; warmUp: WarmUp; windowMs: number; env: Readonly<Record<string, string | undefined>> }): Promise<McpRun> {
  const { points, armsOf, complete } = selectMcp(options.env);
  let blob: Spawned | undefined;
  let blobUrl = '';
  if (points.some((p) => p.call === 'gzip' && armsOf(p).length > 0)) {
    blob = spawnNode(['--import', 'tsx', 'bench/src/mcp/blob-server.ts', String(BLOB_KB)]);
    await until('the blob server', () => blob!.out.includes('"event":"ready"'));
    blobUrl = (JSON.parse(blob.out.slice(blob.out.indexOf('{"event":"ready"')).split('\n')[0]!) as { url: string }).url;
  }
  const ctx: McpContext = {
    redisUrl: options.redisUrl,
    redisPid: options.redisPid,
    redis: options.redis,
    secrets: await mcpFleetSecrets('benchmcp'),
    blobUrl,
    warmUp: options.warmUp,
    windowMs: options.windowMs,
    // BENCH_FROM_SOURCE=1: the fleet from its TypeScript (no build needed; tsx's start-up is not in the window).
    fromSource: options.env.BENCH_FROM_SOURCE === '1',
  };
  const samples = new Map<string, McpSample[]>();
  return {
    points,
    armsOf,
    complete,
    async measure(arm, point) {
      const sample = await measureMcp(arm, point, ctx);
      const key = `${point.name}|${arm}`;
      samples.set(key, [...(samples.get(key) ?? []), sample]);
      return sample;
    },
    results() {
      const summaries = points.flatMap((p) => armsOf(p).map((arm) => summariseMcp(p.name, arm, samples.get(`${p.name}|${arm}`) ?? [])));
      const checks = mcpChecks(summaries);
      const markdown = summaries.length === 0 ? '' : ['## MCP servers', '', MCP_DESCRIPTION, '', mcpTable(summaries), ''].join('\n');
      return { summaries, checks, markdown };
    },
    async stop() {
      if (blob !== undefined) await stopAll([blob]);
    },
  };
}
