import { z } from 'zod';

/** Longest progress message kept; longer ones are cut (a progress line is for people, not data). */
export const MAX_PROGRESS_MESSAGE = 1000;

/**
 * How far a running call has got, as its tool reports it: `progress` out of
 * `total` when the total is known (MCP's progress notification carries the
 * same three fields). `at` is when the worker took the report (epoch ms).
 */
export const CallProgress = z.object({
  progress: z.number().finite(),
  total: z.number().finite().positive().optional(),
  message: z.string().max(MAX_PROGRESS_MESSAGE).optional(),
  at: z.number().int().nonnegative(),
});
export type CallProgress = z.infer<typeof CallProgress>;

/** What a handler passes to `ctx.progress`. */
export interface ProgressUpdate {
  /** Work done so far, in any unit; it should grow from one report to the next. */
  readonly progress: number;
  /** Work in all, when known. */
  readonly total?: number | undefined;
  /** A short line for a person watching (cut at {@link MAX_PROGRESS_MESSAGE} characters). */
  readonly message?: string | undefined;
}

/**
 * Checks a handler's report and stamps it. A malformed report is a bug in the
 * handler, so it throws there (and the call fails with that message) rather
 * than reaching a client as a nonsense progress bar.
 * @throws TypeError naming what is wrong.
 */
export function progressOf(update: ProgressUpdate, at = Date.now()): CallProgress {
  if (typeof update !== 'object' || update === null) throw new TypeError('ctx.progress takes an object: { progress, total?, message? }');
  const { progress, total, message } = update;
  if (typeof progress !== 'number' || !Number.isFinite(progress)) throw new TypeError(`ctx.progress: progress must be a finite number, got ${String(progress)}`);
  if (total !== undefined && (typeof total !== 'number' || !Number.isFinite(total) || total <= 0)) {
    throw new TypeError(`ctx.progress: total must be a positive finite number when given, got ${String(total)}`);
  }
  if (message !== undefined && typeof message !== 'string') throw new TypeError('ctx.progress: message must be a string when given');
  return {
    progress,
    ...(total === undefined ? {} : { total }),
    ...(message === undefined ? {} : { message: message.length > MAX_PROGRESS_MESSAGE ? `${message.slice(0, MAX_PROGRESS_MESSAGE - 1)}…` : message }),
    at,
  };
}

/**
 * Passes a call's progress on at most once per `intervalMs`: a handler may
 * report in a tight loop, and each report that leaves the worker costs Redis
 * writes and a message to every waiting dispatcher. The first report goes at
 * once, later ones wait for the interval and only the newest is kept.
 * {@link ProgressThrottle.close} sends what is pending at once: the last
 * report before the result always leaves (a fast tool's last report is the
 * one most likely to be waiting), and nothing leaves after it.
 */
export class ProgressThrottle {
  #pending: CallProgress | undefined;
  #timer: NodeJS.Timeout | undefined;
  #last = -Infinity;
  #closed = false;

  constructor(
    private readonly intervalMs: number,
    private readonly send: (progress: CallProgress) => void,
  ) {}

  push(progress: CallProgress): void {
    if (this.#closed) return;
    const wait = this.#last + this.intervalMs - performance.now();
    if (wait <= 0 && this.#timer === undefined) {
      this.#emit(progress);
      return;
    }
    this.#pending = progress;
    this.#timer ??= setTimeout(() => {
      this.#timer = undefined;
      const next = this.#pending;
      this.#pending = undefined;
      if (next !== undefined && !this.#closed) this.#emit(next);
    }, Math.max(0, wait));
  }

  /** Sends the pending report, if any, now; later pushes are ignored. Call it before the result goes out. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    const last = this.#pending;
    this.#pending = undefined;
    if (last !== undefined) this.#emit(last);
  }

  #emit(progress: CallProgress): void {
    this.#last = performance.now();
    this.send(progress);
  }
}
