import { StringDecoder } from 'node:string_decoder';
import { redactSecrets } from './secret-value.js';
import { ToldPerWindow } from './told-per-window.js';

/** The most characters of one stderr line that are passed on; the rest are counted. */
const MAX_LINE_CHARS = 2_000;

export interface StderrLinesOptions {
  /** Values of the server's environment that must never be passed on (each is replaced, see {@link redactSecrets}). */
  readonly secrets: readonly string[];
  /** Lines passed on per window at most; the others are counted and told once the window ends. */
  readonly maxLines: number;
  readonly windowMs: number;
  readonly now?: () => number;
}

/**
 * Reads a server's stderr as lines for the worker's log. A server may write
 * anything there, as much as it likes: each line is cut to its first
 * {@link MAX_LINE_CHARS} characters (a line that never ends holds no more
 * than that), its secret values are redacted, and at most `maxLines` lines a
 * window are passed on; the rest are counted and told as one number when the
 * next line comes after the window, or at the end. So a server that logs a
 * line per call, or loops printing, costs the log a bounded rate.
 */
export class StderrLines {
  readonly #o: StderrLinesOptions;
  readonly #decoder = new StringDecoder('utf8');
  readonly #line: (line: string) => void;
  readonly #dropped: (lines: number) => void;
  /** The start of the current line (kept only to its bound plus the longest secret), and its full length. */
  #held = '';
  #chars = 0;
  readonly #keep: number;
  readonly #told: ToldPerWindow;

  constructor(options: StderrLinesOptions, line: (line: string) => void, dropped: (lines: number) => void) {
    this.#o = options;
    this.#line = line;
    this.#dropped = dropped;
    // A secret cut at the line's bound must still be found whole, or a prefix of it would be shown.
    this.#keep = MAX_LINE_CHARS + Math.max(0, ...options.secrets.map((s) => s.length));
    this.#told = new ToldPerWindow(options.maxLines, options.windowMs, options.now);
  }

  push(chunk: Buffer): void {
    const text = this.#decoder.write(chunk);
    let start = 0;
    for (;;) {
      const newline = text.indexOf('\n', start);
      this.#take(text.slice(start, newline === -1 ? text.length : newline));
      if (newline === -1) return;
      this.#endLine();
      start = newline + 1;
    }
  }

  /** The stream ended: its unfinished line, and the count of lines left out, are told now. */
  end(): void {
    this.#take(this.#decoder.end());
    this.#endLine();
    const left = this.#told.drain();
    if (left > 0) this.#dropped(left);
  }

  #take(part: string): void {
    if (part === '') return;
    this.#chars += part.length;
    if (this.#held.length < this.#keep) this.#held += part.slice(0, this.#keep - this.#held.length);
  }

  #endLine(): void {
    if (this.#chars === 0) return;
    const chars = this.#chars;
    let text = this.#held.endsWith('\r') && chars === this.#held.length ? this.#held.slice(0, -1) : this.#held;
    this.#held = '';
    this.#chars = 0;
    text = redactSecrets(text, this.#o.secrets);
    if (chars > MAX_LINE_CHARS) text = `${text.slice(0, MAX_LINE_CHARS)}… (${chars} characters)`;
    if (text === '') return;
    this.#pass(text);
  }

  #pass(text: string): void {
    const left = this.#told.take();
    if (left === 'drop') return;
    if (left > 0) this.#dropped(left);
    this.#line(text);
  }
}
