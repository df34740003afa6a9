/**
 * How long a point runs before its window opens. A fresh fleet runs its call
 * path as V8's interpreter and baseline code for its first few thousand
 * calls; at 256 in flight the time warm-up covers that many times over, at
 * one call in flight (a few hundred calls a second) it did not: the 1-in-flight
 * points measured processes that had served a few hundred calls, not a
 * running fleet. So a window also waits until the agents have made
 * `calls` calls between them — every arm the same number, raw BullMQ's
 * too — up to {@link WARMUP_CAP_MS}.
 */
export interface WarmUp {
  /** The shortest warm-up. */
  readonly ms: number;
  /** Calls every point's agents make, between them, before its window. */
  readonly calls: number;
}

/** A warm-up never waits longer than this for its calls (a slow arm is measured all the same). */
export const WARMUP_CAP_MS = 60_000;

/** What an agent of `agents` is told: its share of the point's warm-up calls (agent-loop.ts reads it). */
export function warmUpEnv(warmUp: WarmUp, agents: number): Record<string, string> {
  return { BENCH_WARMUP_CALLS: String(Math.ceil(warmUp.calls / agents)) };
}

/** Waits out the warm-up: at least `ms`, and until every agent said it made its share of calls. */
export async function warmUpDone(warmUp: WarmUp, outputs: () => readonly string[], ms = warmUp.ms): Promise<void> {
  const began = performance.now();
  await new Promise((resolve) => setTimeout(resolve, ms));
  while (!outputs().every((out) => out.includes('"event":"warm"')) && performance.now() - began < WARMUP_CAP_MS) {
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
