import type { CallSlots } from './call-slots.js';

/**
 * How many jobs the worker's BullMQ Worker may hold at once. BullMQ fetches
 * jobs while fewer than `concurrency` are active, and a job may carry a batch
 * of calls: left alone, a busy worker would hoard jobs whose calls only wait
 * for its slots while other workers idle. So the job limit follows the call
 * slots: as many more jobs as the spare slots would fill at the recent
 * calls-per-job, and at least one while any slot is spare. (One job at a
 * time would starve a worker fed many small jobs.)
 */
export class JobFetchGovernor {
  readonly #slots: CallSlots;
  readonly #setLimit: (jobs: number) => void;
  /** Jobs being processed, and their calls that have not asked for a slot yet. */
  #activeJobs = 0;
  #unasked = 0;
  /** Moving average of calls per job. */
  #callsPerJob = 1;

  /** @param setLimit sets the BullMQ Worker's `concurrency` (jobs it may hold). */
  constructor(slots: CallSlots, setLimit: (jobs: number) => void) {
    this.#slots = slots;
    this.#setLimit = setLimit;
  }

  /** A job of `calls` calls was taken. */
  jobTaken(calls: number): void {
    this.#activeJobs++;
    this.#unasked += calls;
    this.#callsPerJob = 0.8 * this.#callsPerJob + 0.2 * calls;
    this.govern();
  }

  /** One of a taken job's calls asks for its slot. */
  callAsks(): void {
    this.#unasked--;
  }

  /** A taken job is done (every call of it ended). */
  jobDone(): void {
    this.#activeJobs--;
    this.govern();
  }

  /** Sets the job limit from the slots free now. */
  govern(): void {
    // Idle, fetch one job and start it: BullMQ fetches up to `concurrency` jobs before it runs the first,
    // and an idle worker would otherwise make an empty second fetch before starting a lone call.
    if (this.#activeJobs === 0) {
      this.#setLimit(1);
      return;
    }
    const spare = this.#slots.spare - this.#unasked;
    const more = spare > 0 ? Math.max(1, Math.floor(spare / this.#callsPerJob)) : 0;
    this.#setLimit(this.#activeJobs + more);
  }
}
