import { StringDecoder } from 'node:string_decoder';
import { redactSecrets } from './secret-value.js';

/**
 * The last `maxChars` characters a server wrote to stderr, with its secret
 * values already replaced: what an instance's exit, a failed start and
 * `MCP_SERVER_LOST` show. Redaction happens as the text arrives, before the
 * tail is cut, and never on a cut text: a cut through a secret would leave a
 * part of it that no longer matches (the first characters cut off, 18 of 19
 * left). A chunk's end that may be the start of a secret the next chunk
 * finishes is held back until it is known; only redacted text is ever cut.
 */
export class StderrTail {
  readonly #secrets: readonly string[];
  readonly #maxChars: number;
  readonly #decoder = new StringDecoder('utf8');
  /** Redacted text, at most `maxChars` long. */
  #tail = '';
  /** The end of what arrived that may begin a secret: not redacted yet, shorter than the longest secret. */
  #pending = '';

  /** @param secrets longest first, so a secret that holds another is replaced whole. */
  constructor(secrets: readonly string[], maxChars: number) {
    this.#secrets = secrets;
    this.#maxChars = maxChars;
  }

  push(chunk: Buffer): void {
    const text = redactSecrets(this.#pending + this.#decoder.write(chunk), this.#secrets);
    const hold = this.#heldBack(text);
    this.#pending = text.slice(text.length - hold);
    this.#append(text.slice(0, text.length - hold));
  }

  /** What the server wrote last, redacted. What is held back is not a secret unless more follows; shown as it is. */
  get text(): string {
    return `${this.#tail}${this.#pending}`.slice(-this.#maxChars);
  }

  #append(text: string): void {
    if (text === '') return;
    this.#tail = `${this.#tail}${text}`.slice(-this.#maxChars);
  }

  /** How many of `text`'s last characters are a proper prefix of some secret (0 when none). */
  #heldBack(text: string): number {
    let hold = 0;
    for (const secret of this.#secrets) {
      for (let k = Math.min(secret.length - 1, text.length); k > hold; k -= 1) {
        if (text.endsWith(secret.slice(0, k))) {
          hold = k;
          break;
        }
      }
    }
    return hold;
  }
}
