/**
 * The MCP servers points of `npm run bench` (issue #16, "Measured"): which
 * arms each measures, how many calls it keeps in flight, which tool it calls
 * and how the fleet serves the server. `BENCH_POINTS` and `BENCH_ARMS` select
 * among them as among the other points.
 */
import type { McpServing } from './fleet.js';

/**
 * - `mcp-direct`: the agent spawns the server over stdio itself (how agents use stdio servers today).
 * - `mcp-proxy`, `mcp-supergateway`: the agent reaches one gateway over Streamable HTTP.
 * - `mcp-fleet`: `FleetClient` → dispatcher → one host worker with the server's instances.
 * - `mcp-fleet-x2`: the same with a second worker process, and so twice the instances.
 */
export type McpArm = 'mcp-direct' | 'mcp-proxy' | 'mcp-supergateway' | 'mcp-fleet' | 'mcp-fleet-x2';
export const MCP_ARMS: readonly McpArm[] = Object.freeze(['mcp-direct', 'mcp-proxy', 'mcp-supergateway', 'mcp-fleet', 'mcp-fleet-x2']);

export interface McpPoint {
  readonly name: string;
  readonly inflight: number;
  /** `echo` (the figures), or `gzip` (the CPU-bound call of the scale point; see everything.ts). */
  readonly call: 'echo' | 'gzip';
  readonly arms: readonly McpArm[];
  /** How each fleet worker serves the server. */
  readonly serving: McpServing;
  /** Each fleet worker's `--concurrency`: its instances' slots, so that calls wait in the queue, where another worker can take them. */
  readonly workerConcurrency: number;
}

/** The two points of the comparison: 2 instances, 128 calls each in flight: the worker's 256 slots. */
const ECHO_SERVING = Object.freeze({ instances: 2, callsPerInstance: 128 });
const COMPARED: readonly McpArm[] = Object.freeze(['mcp-direct', 'mcp-proxy', 'mcp-supergateway', 'mcp-fleet']);

export const MCP_POINTS: readonly McpPoint[] = Object.freeze([
  { name: 'mcp-1', inflight: 1, call: 'echo', arms: COMPARED, serving: ECHO_SERVING, workerConcurrency: 256 },
  { name: 'mcp-256', inflight: 256, call: 'echo', arms: COMPARED, serving: ECHO_SERVING, workerConcurrency: 256 },
  /**
   * Scale: a CPU-bound call, one worker with one instance against two workers
   * with one each. A stdio server is one process, on one core at most: from one
   * instance, a second worker's instance has a core of this two-core machine to
   * run on (from two instances, as measured until 2026-12-02, both cores were
   * taken already and the point could not show a rise). 4 calls per instance
   * and a worker concurrency of 4 keep each worker's share bounded by its
   * instance, so the second worker takes what the first cannot; 64 in flight
   * keep both busy.
   */
  { name: 'mcp-scale', inflight: 64, call: 'gzip', arms: ['mcp-fleet', 'mcp-fleet-x2'], serving: { instances: 1, callsPerInstance: 4 }, workerConcurrency: 4 },
] satisfies McpPoint[]);

/** The MCP points and arms a run measures, from `BENCH_POINTS` / `BENCH_ARMS` (unset: all). */
export function selectMcp(env: Readonly<Record<string, string | undefined>>): { points: readonly McpPoint[]; armsOf: (point: McpPoint) => readonly McpArm[]; complete: boolean } {
  const onlyPoints = env.BENCH_POINTS?.split(',');
  const onlyArms = env.BENCH_ARMS?.split(',');
  const points = onlyPoints === undefined ? MCP_POINTS : MCP_POINTS.filter((p) => onlyPoints.includes(p.name));
  const armsOf = (point: McpPoint): readonly McpArm[] => point.arms.filter((a) => onlyArms?.includes(a) ?? true);
  return { points, armsOf, complete: points.length === MCP_POINTS.length && points.every((p) => armsOf(p).length === p.arms.length) };
}

/** Fleet workers an arm runs. */
export function workersOf(arm: McpArm): number {
  return arm === 'mcp-fleet-x2' ? 2 : 1;
}
