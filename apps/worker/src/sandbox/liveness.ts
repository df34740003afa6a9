import { ConfigInvalidError } from '@forge-fleet/shared';

/**
 * Share of the waited time a process must have spent on CPU to count as
 * busy rather than frozen. A loop blocked in `Atomics.wait` (or stopped)
 * uses none; a computing one uses close to all of it, even on a loaded
 * machine — and that one is the CPU limit's to stop.
 */
export const BUSY_CPU_SHARE = 0.1;

/** The liveness settings of {@link SandboxLimits} (defaults in DEFAULT_LIMITS). */
export interface LivenessLimits {
  readonly livenessIntervalMs: number;
  readonly livenessTimeoutMs: number;
}

/** @throws ConfigInvalidError naming each liveness limit that makes no sense. */
export function checkLivenessLimits(limits: LivenessLimits): void {
  const problems: string[] = [];
  if (!Number.isInteger(limits.livenessIntervalMs) || limits.livenessIntervalMs < 10) problems.push(`limits.livenessIntervalMs must be an integer of at least 10, got ${limits.livenessIntervalMs}`);
  if (!Number.isInteger(limits.livenessTimeoutMs) || !(limits.livenessTimeoutMs > limits.livenessIntervalMs)) {
    problems.push(`limits.livenessTimeoutMs must be an integer above livenessIntervalMs (${limits.livenessIntervalMs}), got ${limits.livenessTimeoutMs}`);
  }
  if (problems.length > 0) throw new ConfigInvalidError('sandbox options', problems);
}

/**
 * Whether a process that has not answered a ping for `waitedMs` is frozen:
 * it used less than {@link BUSY_CPU_SHARE} of that time on CPU. Where its CPU
 * time cannot be read, a silent process counts as frozen.
 */
export function isFrozen(waitedMs: number, cpuUsedSeconds: number | undefined): boolean {
  return cpuUsedSeconds === undefined || cpuUsedSeconds * 1000 < waitedMs * BUSY_CPU_SHARE;
}

export interface LivenessCheckOptions extends LivenessLimits {
  /** Sends a ping with this number; the process answers with {@link LivenessCheck.pong}. */
  readonly ping: (seq: number) => void;
  /** The process's CPU time so far, in seconds; undefined where it cannot be read. */
  readonly cpuSeconds: () => number | undefined;
  /** Called once when the process is found frozen, with how long it went without answering. */
  readonly onFrozen: (silentMs: number) => void;
}

interface Outstanding {
  readonly seq: number;
  /** When (performance.now()) the ping went out. */
  readonly sentAt: number;
  /** When (performance.now()) the current window began: the ping, or the last time the process was found busy. */
  since: number;
  cpuSince: number | undefined;
}

/**
 * The liveness check of one sandbox process's event loop, while it runs
 * calls: every `livenessIntervalMs` a ping goes out unless one is still
 * unanswered; one unanswered for `livenessTimeoutMs` while the process used
 * next to no CPU ({@link isFrozen}) means the loop is blocked without
 * working — `Atomics.wait`, say — which neither the CPU limit nor any
 * timeout would notice in the calls sharing that process.
 */
export class LivenessCheck {
  readonly #options: LivenessCheckOptions;
  #timer: NodeJS.Timeout | undefined;
  #seq = 0;
  #outstanding: Outstanding | undefined;

  constructor(options: LivenessCheckOptions) {
    this.#options = options;
  }

  /** Starts checking (again); a no-op while checking. */
  start(): void {
    this.#timer ??= setInterval(() => this.#tick(), this.#options.livenessIntervalMs);
  }

  /** Stops checking and forgets the unanswered ping: an idle process is not watched. */
  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
    this.#outstanding = undefined;
  }

  /** The process answered ping `seq`. */
  pong(seq: number): void {
    if (this.#outstanding?.seq === seq) this.#outstanding = undefined;
  }

  #tick(): void {
    const outstanding = this.#outstanding;
    if (outstanding === undefined) {
      this.#seq += 1;
      const now = performance.now();
      this.#outstanding = { seq: this.#seq, sentAt: now, since: now, cpuSince: this.#options.cpuSeconds() };
      this.#options.ping(this.#seq);
      return;
    }
    if (performance.now() - outstanding.since < this.#options.livenessTimeoutMs) return;
    // Judged after this turn's poll phase: an answer that arrived while this worker's own loop was busy is read first.
    setImmediate(() => {
      if (this.#outstanding !== outstanding || this.#timer === undefined) return;
      const now = performance.now();
      const cpu = this.#options.cpuSeconds();
      const used = cpu === undefined || outstanding.cpuSince === undefined ? undefined : cpu - outstanding.cpuSince;
      if (isFrozen(now - outstanding.since, used)) {
        const silentMs = Math.round(now - outstanding.sentAt);
        this.stop();
        this.#options.onFrozen(silentMs);
        return;
      }
      // Busy computing: a fresh window, so a loop that stops working and blocks is found a timeout later.
      outstanding.since = now;
      outstanding.cpuSince = cpu;
    });
  }
}
