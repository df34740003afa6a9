/** Longest media type an answer repeats back: a header may hold 16 KiB, an error names the type, not the header. @defaultValue 128 */
export const MAX_REPORTED_MEDIA_TYPE_CHARS = 128;

/**
 * The media type of a `content-type` header as an answer reports it: lower-cased,
 * parameters dropped (`text/plain; charset=utf-8` is `text/plain`), at most
 * {@link MAX_REPORTED_MEDIA_TYPE_CHARS} characters; `none` when no type was sent.
 */
export function mediaTypeOf(header: string | readonly string[] | undefined): string {
  const value = typeof header === 'string' ? header : header?.[0];
  const type = value?.split(';', 1)[0]?.trim().toLowerCase() ?? '';
  return type === '' ? 'none' : type.slice(0, MAX_REPORTED_MEDIA_TYPE_CHARS);
}

/** What to send instead, by route: the JSON routes, and the call stream's. */
export const MEDIA_TYPE_REMEDY = {
  json: 'send application/json (a call stream, application/x-ndjson, goes to POST /v1/calls/stream)',
  callStream: 'send a call stream as content-type application/x-ndjson, one call per line',
} as const;
