import type { McpServerPoolOptions } from './pool-options.js';

/** The restart settings these decisions read. */
export type RestartSettings = McpServerPoolOptions['restart'];

/**
 * How long to wait before starting an instance after `failuresInARow`
 * failures in a row (1 for the first): exponential from the initial delay,
 * capped, so a server that dies at once does not spin the CPU.
 */
export function restartDelayMs(failuresInARow: number, restart: RestartSettings): number {
  if (failuresInARow <= 0) return 0;
  // 2 ** 40 ms already exceeds any cap; bounding the exponent keeps the number finite.
  const exponent = Math.min(failuresInARow - 1, 40);
  return Math.min(restart.initialDelayMs * 2 ** exponent, restart.maxDelayMs);
}

/** Whether the failures at `failureTimes` (epoch ms) make a crash loop as of `now`: then the pool stops for good. */
export function isCrashLoop(failureTimes: readonly number[], now: number, restart: RestartSettings): boolean {
  const recent = failureTimes.filter((t) => now - t < restart.crashLoopWindowMs).length;
  return recent >= restart.crashLoopFailures;
}
