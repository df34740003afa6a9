import { StringDecoder } from 'node:string_decoder';

/**
 * Returns a chunk handler for newline-delimited text (NDJSON): calls
 * `onLine` for every complete, non-empty line, in order, and keeps the
 * unfinished tail (multi-byte characters split across chunks included) for
 * the next chunk. A line longer than `maxLineChars` is dropped and reported
 * through `onOverflow` (once per overlong line), whether it came whole in one
 * chunk or its tail grew past the limit first: a peer that never sends a
 * newline must not grow memory without bound.
 */
export function lineReader(onLine: (line: string) => void, options: { maxLineChars?: number; onOverflow?: () => void } = {}): (chunk: Buffer) => void {
  const decoder = new StringDecoder('utf8');
  const max = options.maxLineChars ?? Number.POSITIVE_INFINITY;
  let tail = '';
  let skipping = false;
  return (chunk) => {
    const text = tail + decoder.write(chunk);
    let start = 0;
    for (let end = text.indexOf('\n'); end !== -1; end = text.indexOf('\n', start)) {
      const line = text.slice(start, end);
      start = end + 1;
      if (skipping) skipping = false;
      // Over the limit though it arrived whole (its newline in the same chunk, as a busy socket coalesces
      // writes): refused as a tail that grew past the limit is, so the answer does not depend on chunking.
      else if (line.length > max) options.onOverflow?.();
      else if (line !== '') onLine(line);
    }
    tail = start === 0 ? text : text.slice(start);
    if (tail.length > max) {
      tail = '';
      if (!skipping) options.onOverflow?.();
      skipping = true;
    }
  };
}
