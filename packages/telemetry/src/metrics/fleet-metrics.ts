import type { AuditEntry, QueueStatsList } from '@forge-fleet/shared';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

/** How a call ended (or was refused), as `forge_calls_total` counts it. */
export type CallOutcome = 'completed' | 'failed' | 'denied' | 'out_of_scope' | 'expired' | 'cancelled' | 'forged' | 'rejected';

/**
 * Seconds, from a millisecond cache hit to a five-minute tool: tool calls
 * span five orders of magnitude, so the buckets do too.
 */
const SECONDS_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];

/** Tool names of refused calls are whatever the caller sent: never labels (a label per name would let any caller grow the series without bound). */
const UNKNOWN_TOOL = '(unknown)';

/** What a dispatcher reads when it is scraped. */
export interface ScrapeSources {
  readonly queues?: (() => Promise<QueueStatsList>) | undefined;
  readonly approvalsPending?: (() => Promise<number>) | undefined;
}

/**
 * The outcome an audit entry stands for, or undefined for a decision that is
 * not an end (listed, approved, awaiting a person) or not about a call.
 */
export function outcomeOf(entry: Pick<AuditEntry, 'decision' | 'category' | 'code' | 'errorCategory' | 'callId'>): CallOutcome | undefined {
  if (entry.callId === undefined) return undefined;
  const decision = entry.decision ?? 'rejected';
  switch (decision) {
    case 'completed':
    case 'cancelled':
      return decision;
    case 'failed':
      if (entry.code === 'EXPIRED') return 'expired';
      if (entry.code === 'APPROVAL_DENIED') return 'denied';
      // Counted once, by the entry that refused it.
      if (entry.code === 'FORGED_CALL') return undefined;
      return 'failed';
    case 'rejected': {
      const category = entry.category ?? (entry.errorCategory === 'forged_call' ? 'forged' : entry.errorCategory);
      if (category === 'out_of_scope' || category === 'denied' || category === 'forged') return category;
      // A request refused before any call existed (no token, wrong role) is not a call's outcome.
      if (category === 'unauthenticated' || category === 'forbidden') return undefined;
      return 'rejected';
    }
    default:
      return undefined;
  }
}

/**
 * The fleet's Prometheus metrics for one process (dispatcher or worker), on a
 * registry of its own so tests and embedders can run several side by side.
 * Names follow Prometheus conventions: `forge_` prefix, base units, `_total`
 * for counters. Every process counts the outcomes it decides (a dispatcher:
 * refusals, denials, approval expiries; a worker: completions, failures,
 * forgeries, queue expiries), so the fleet's totals are sums over processes.
 */
export class FleetMetrics {
  readonly registry = new Registry();
  readonly calls = new Counter({
    name: 'forge_calls_total',
    help: 'Tool calls by tool, tier and outcome (completed, failed, denied, out_of_scope, expired, cancelled, forged, rejected).',
    labelNames: ['tool', 'tier', 'outcome'] as const,
    registers: [this.registry],
  });
  readonly queueWait = new Histogram({
    name: 'forge_call_queue_wait_seconds',
    help: 'Time from the dispatcher accepting a call to a worker starting it.',
    labelNames: ['tool', 'tier'] as const,
    buckets: SECONDS_BUCKETS,
    registers: [this.registry],
  });
  readonly execution = new Histogram({
    name: 'forge_call_execution_seconds',
    help: "Time a worker spent running a call's handler.",
    labelNames: ['tool', 'tier'] as const,
    buckets: SECONDS_BUCKETS,
    registers: [this.registry],
  });
  readonly endToEnd = new Histogram({
    name: 'forge_call_duration_seconds',
    help: 'Time from the dispatcher accepting a call to its result being stored (queue wait, approval excluded, plus execution).',
    labelNames: ['tool', 'tier'] as const,
    buckets: SECONDS_BUCKETS,
    registers: [this.registry],
  });
  readonly sandboxStarted = new Counter({
    name: 'forge_sandbox_processes_started_total',
    help: 'Sandbox processes started (warm pool fills and replacements).',
    registers: [this.registry],
  });
  readonly sandboxStopped = new Counter({
    name: 'forge_sandbox_processes_stopped_total',
    help: 'Sandbox processes that ended, by reason (resource_limit, cancelled, internal for retired or closed, execution_failed for a malformed reply, exited when it died by itself).',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });

  /**
   * Label children by their label values: every call observes four series,
   * and prom-client hashes a labels object on each observation unless given
   * the child. Bounded by the known tools × tiers × outcomes.
   */
  readonly #outcomeChildren = new Map<string, { inc(): void }>();
  readonly #runChildren = new Map<string, { queueWait: { observe(v: number): void }; execution: { observe(v: number): void }; endToEnd: { observe(v: number): void } }>();

  /** Tool names the catalog knows; others are counted as `(unknown)`. */
  #knownTool: (name: string) => boolean = () => true;

  /**
   * @param role `dispatcher` or `worker`, a constant label on every series.
   * @param sources what a dispatcher reads at each scrape (queue depth, live workers, pending approvals).
   */
  constructor(role: 'dispatcher' | 'worker', sources: ScrapeSources = {}, labels: Record<string, string> = {}) {
    this.registry.setDefaultLabels({ role, ...labels });
    // Event-loop lag sampled every 100 ms, not prom-client's 10: at 10 ms the sampling alone cost a lightly
    // loaded dispatcher and worker ~0.3 ms of CPU per call each at 1 call in flight (bench/README.md).
    collectDefaultMetrics({ register: this.registry, eventLoopMonitoringPrecision: 100 });
    const { queues, approvalsPending } = sources;
    if (queues !== undefined) {
      // One read serves both gauges of a scrape.
      let reading: Promise<QueueStatsList> | undefined;
      const read = (): Promise<QueueStatsList> => (reading ??= queues().finally(() => setTimeout(() => (reading = undefined), 100)));
      new Gauge({
        name: 'forge_queue_jobs',
        help: 'Jobs in each tier (and host pool) queue, by state (waiting, active, delayed, failed). A job carries one call, or a batch of calls admitted together.',
        labelNames: ['tier', 'pool', 'state'] as const,
        registers: [this.registry],
        async collect() {
          this.reset();
          // A lane may have several packs' queues (and workers' own queues): its jobs are theirs summed.
          for (const q of (await read()).queues) {
            for (const state of ['waiting', 'active', 'delayed', 'failed'] as const) this.inc({ tier: q.tier, pool: q.pool ?? '', state }, q[state]);
          }
        },
      });
      new Gauge({
        name: 'forge_workers',
        help: 'Live workers (holding an unexpired catalog lease) per tier and host pool.',
        labelNames: ['tier', 'pool'] as const,
        registers: [this.registry],
        async collect() {
          this.reset();
          // Summed over the lane's packs; a worker's own queue is that worker again, counted in its pack.
          for (const q of (await read()).queues) if (q.direct !== true) this.inc({ tier: q.tier, pool: q.pool ?? '' }, q.workers);
        },
      });
    }
    if (approvalsPending !== undefined) {
      new Gauge({
        name: 'forge_approvals_pending',
        help: 'Calls waiting for a person to approve, deny or modify them.',
        registers: [this.registry],
        async collect() {
          this.set(await approvalsPending());
        },
      });
    }
  }

  /** Which tool names may become label values (the live catalog's); the rest are `(unknown)`. */
  knownTools(isKnown: (name: string) => boolean): void {
    this.#knownTool = isKnown;
  }

  /** Counts the outcome an audit entry records, if it is one. */
  observeAudit(entry: AuditEntry): void {
    const outcome = outcomeOf(entry);
    if (outcome === undefined) return;
    const tool = entry.tool !== undefined && this.#knownTool(entry.tool) ? entry.tool : UNKNOWN_TOOL;
    const tier = entry.tier ?? '';
    const key = `${tool}\u0000${tier}\u0000${outcome}`;
    let child = this.#outcomeChildren.get(key);
    if (child === undefined) this.#outcomeChildren.set(key, (child = this.calls.labels(tool, tier, outcome)));
    child.inc();
  }

  /** A worker ran a call: its queue wait, handler time and time since acceptance. */
  observeRun(tool: string, tier: string, timing: { queueWaitMs: number; executionMs: number; endToEndMs: number }): void {
    const key = `${tool}\u0000${tier}`;
    let run = this.#runChildren.get(key);
    if (run === undefined) {
      run = { queueWait: this.queueWait.labels(tool, tier), execution: this.execution.labels(tool, tier), endToEnd: this.endToEnd.labels(tool, tier) };
      this.#runChildren.set(key, run);
    }
    // Clocks of two nodes may disagree by a little: a negative wait is a skew, not a time.
    run.queueWait.observe(Math.max(0, timing.queueWaitMs) / 1000);
    run.execution.observe(timing.executionMs / 1000);
    run.endToEnd.observe(Math.max(0, timing.endToEndMs) / 1000);
  }

  /** The text a Prometheus scrape receives, and its content type. */
  async scrape(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }
}
