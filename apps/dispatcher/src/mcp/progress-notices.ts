import { type CallProgress, type CallStatus, isFinalStatus } from '@forge-fleet/shared';

/** The fields of one `notifications/progress` (its token is added by the sender). */
export interface ProgressNotice {
  readonly progress: number;
  readonly total?: number;
  readonly message?: string;
}

/**
 * The `progress` numbers one MCP request's notifications carry. MCP wants
 * `progress` to increase with every notification; the fleet has two sources
 * of news about a call — the statuses the request observes (queued,
 * awaiting_approval, running, then the final one) and the tool's own reports
 * (`ctx.progress`, any numbers) — and this maps both onto one increasing scale:
 *
 * - Status notices, until the tool first reports, count 0, 1, 2…
 * - The tool's reports keep the tool's scale, shifted once (at its first
 *   report) by the least that puts that report above the last notice sent:
 *   by 0 when it already is (its own numbers reach the client: 0.1 of 1 after
 *   `queued`'s 0 goes out as 0.1 of 1), else to one past that notice, so a
 *   tool's 0 after `queued` (0) goes out as 1, and its total shifts with it.
 *   From then on intermediate status notices are left out (they would move
 *   the tool's bar), and a report that does not advance past what was sent
 *   (a tool going back, a retried run starting over) is not sent.
 * - The final status always goes out, once, last: one more than the last
 *   notice, with a total equal to it (the request is done, whatever the outcome).
 *
 * Nothing is sent after the final notice.
 */
export class ProgressNotices {
  #sent: number | undefined;
  #offset: number | undefined;
  #ended = false;

  /** The notice for a status the request observed, or undefined when none is due. */
  status(status: CallStatus): ProgressNotice | undefined {
    if (this.#ended) return undefined;
    const next = this.#sent === undefined ? 0 : this.#sent + 1;
    if (isFinalStatus(status)) {
      this.#ended = true;
      return this.#send({ progress: next, total: next, message: status });
    }
    return this.#offset === undefined ? this.#send({ progress: next, message: status }) : undefined;
  }

  /** The notice for a report of the tool, or undefined when it does not advance past what was sent. */
  report(report: Pick<CallProgress, 'progress' | 'total' | 'message'>): ProgressNotice | undefined {
    if (this.#ended) return undefined;
    const offset = (this.#offset ??= this.#shiftFor(report.progress));
    return this.#send({
      progress: offset + report.progress,
      ...(report.total === undefined ? {} : { total: offset + report.total }),
      ...(report.message === undefined ? {} : { message: report.message }),
    });
  }

  /**
   * The shift of the tool's scale, fixed at its first report: 0 when that report is already above the last notice
   * (0.1 after `queued`'s 0 goes out as 0.1), else what puts it one step past it (0 after 0 goes out as 1); before any
   * notice, what brings a negative report to 0.
   */
  #shiftFor(first: number): number {
    if (this.#sent === undefined) return Math.max(0, -first);
    return first > this.#sent ? 0 : this.#sent + 1 - first;
  }

  #send(notice: ProgressNotice): ProgressNotice | undefined {
    if (this.#sent !== undefined && notice.progress <= this.#sent) return undefined;
    this.#sent = notice.progress;
    return notice;
  }
}
