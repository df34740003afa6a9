import type { CallProgress, CallView } from '@forge-fleet/shared';
import { formatDuration, printable } from './output.js';

/** Where the progress line goes: a terminal (rewritten in place) or a pipe or file (a line per change). */
export interface StatusStream {
  write(text: string): unknown;
  /** True for a terminal. */
  readonly isTTY?: boolean | undefined;
  /** The terminal's width, when known: a rewritten line must not wrap, or `\r` cannot take it back. */
  readonly columns?: number | undefined;
}

/** `12.5` → `12.5`, `1/3` → `0.33`: progress units may be fractional. */
function amount(n: number): string {
  return Number.isInteger(n) ? String(n) : n.toFixed(2).replace(/0+$/, '');
}

/** `3/10 (30%) step 3`, or `3 step 3` without a total. */
export function describeProgress(p: CallProgress): string {
  const done = p.total === undefined ? amount(p.progress) : `${amount(p.progress)}/${amount(p.total)} (${Math.min(100, Math.max(0, Math.floor((p.progress / p.total) * 100)))}%)`;
  return p.message === undefined ? done : `${done} ${printable(p.message)}`;
}

/** The part of the line that changes with the call (not with the clock): its status, why it waits, its progress. */
export function describeCall(view: CallView): string {
  const parts = [`call ${view.id}`, view.status];
  if (view.status === 'awaiting_approval' && view.reason !== undefined) parts.push(printable(view.reason));
  if (view.progress !== undefined) parts.push(describeProgress(view.progress));
  return parts.join(' · ');
}

/**
 * The status line `forge call --wait` keeps on stderr: on a terminal one line
 * rewritten in place (`\r`), elsewhere a line for each reading (about one a
 * second) whose status or progress differs from the line before, so a log
 * shows each state it saw once and not a line per second.
 */
export class ProgressLine {
  #last: string | undefined;
  #drawn = false;

  constructor(private readonly out: StatusStream) {}

  /** Shows the call as it is now, `elapsedMs` after it was submitted. */
  show(view: CallView, elapsedMs: number): void {
    const state = describeCall(view);
    const line = `${state} · ${formatDuration(elapsedMs)}`;
    if (this.out.isTTY === true) {
      const width = this.out.columns === undefined || this.out.columns < 2 ? line.length : this.out.columns - 1;
      this.out.write(`\r${line.slice(0, width)}\x1b[K`);
      this.#drawn = true;
    } else if (state !== this.#last) {
      this.out.write(`${line}\n`);
    }
    this.#last = state;
  }

  /** Takes the line off a terminal, so what follows starts on a clean line. */
  end(): void {
    if (this.#drawn) this.out.write('\r\x1b[K');
    this.#drawn = false;
  }
}
