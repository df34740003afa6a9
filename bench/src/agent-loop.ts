/**
 * The measuring loop every benchmark agent runs: `inflight` concurrent call
 * loops; latencies and completions count only inside the window the
 * orchestrator opens with SIGUSR1 and closes with SIGUSR2, so all processes
 * of a point measure the same stretch of time.
 */
export interface AgentReport {
  readonly calls: number;
  readonly errors: number;
  readonly windowMs: number;
  /** Latencies of the calls completed in the window, in ms, sorted. */
  readonly latenciesMs: number[];
}

export async function runAgent(inflight: number, callOnce: () => Promise<unknown>): Promise<void> {
  // Calls to make before saying it is warm (warm-up.ts): the orchestrator opens the window after that.
  let warming = Number(process.env.BENCH_WARMUP_CALLS ?? 0);
  const warm = (): void => {
    warming = -1;
    process.stdout.write(`${JSON.stringify({ event: 'warm' })}\n`);
  };
  let measuring = false;
  let running = true;
  let windowStart = 0;
  let calls = 0;
  let errors = 0;
  let reported = 0;
  const latencies: number[] = [];

  const report = new Promise<void>((resolve) => {
    process.once('SIGUSR1', () => {
      measuring = true;
      windowStart = performance.now();
    });
    process.once('SIGUSR2', () => {
      measuring = false;
      running = false;
      const out: AgentReport = { calls, errors, windowMs: performance.now() - windowStart, latenciesMs: latencies.sort((a, b) => a - b) };
      process.stdout.write(`${JSON.stringify({ event: 'report', ...out })}\n`, () => resolve());
    });
  });

  const loop = async (): Promise<void> => {
    while (running) {
      const t0 = performance.now();
      try {
        await callOnce();
        if (measuring) {
          calls++;
          latencies.push(performance.now() - t0);
        } else if (warming > 0 && --warming === 0) {
          warm();
        }
      } catch (error) {
        if (measuring) errors++;
        // A few lines say what is wrong; thousands would drown it.
        if (reported++ < 3) process.stderr.write(`call failed: ${error instanceof Error ? error.message : String(error)}\n`);
        // A failing target (not up, refusing) must not turn this loop into a busy spin.
        await new Promise((r) => setTimeout(r, 50));
      }
    }
  };
  for (let i = 0; i < inflight; i++) void loop();
  process.stdout.write(`${JSON.stringify({ event: 'ready' })}\n`);
  if (warming <= 0) warm();
  await report;
}
