import { inspect } from 'node:util';

/**
 * A value taken from the worker's environment or from a file, for a server's
 * environment or an upstream's headers. It must reach the server and nothing
 * else: printed, logged (pino calls `toJSON`) or inspected, it shows only where
 * it came from. Every value from `fromEnv`/`fromFile` is treated as a secret —
 * the file cannot tell a token from a `PATH`, and showing too little is the safe mistake.
 */
export class SecretValue {
  readonly #value: string;
  /** Where the value came from, e.g. `environment variable GITHUB_TOKEN` or `file /run/secrets/token`: what may be shown. */
  readonly source: string;

  constructor(value: string, source: string) {
    this.#value = value;
    this.source = source;
    Object.freeze(this);
  }

  /** The value itself, for the one place that hands it to the server (spawn's `env`, a request's headers). */
  reveal(): string {
    return this.#value;
  }

  /** @returns `[secret from <source>]`, never the value. */
  toString(): string {
    return `[secret from ${this.source}]`;
  }

  /** @returns `[secret from <source>]`, never the value. */
  toJSON(): string {
    return this.toString();
  }

  /** @returns `[secret from <source>]`, never the value. */
  [inspect.custom](): string {
    return this.toString();
  }
}

/** A configured value: a literal written in the servers file (not secret, it is in the file), or a {@link SecretValue}. */
export type ConfigValue = string | SecretValue;

/** The plain strings of an `env` or `headers` record, for the call that starts the server or sends the request. */
export function revealAll(values: Readonly<Record<string, ConfigValue>>): Record<string, string> {
  return Object.fromEntries(Object.entries(values).map(([k, v]) => [k, typeof v === 'string' ? v : v.reveal()]));
}

/** Shorter values are not looked for: replacing every `1` or `on` of a text would hide the text, not a secret. */
export const MIN_REDACTED_LENGTH = 4;

/** The shortest space-separated part of a value looked for on its own (the token of `Bearer <token>`). */
const MIN_REDACTED_PART = 8;

/**
 * What to look for in what a server sends, for each secret value it was
 * given: the value, and the forms a careless server writes it in without
 * meaning to encode it — URL-encoded (a query string it built), escaped inside
 * a JSON string (a config or environment it printed with `JSON.stringify`,
 * `json.dumps`, Go's `json.Marshal`: quotes and backslashes escaped, and
 * non-ASCII or `<>&` as `\uXXXX`) — and each longer space-separated part of
 * it. Longest first, so that a value is replaced before a part of it.
 */
export function secretForms(values: readonly string[]): string[] {
  const found = new Set<string>();
  const add = (value: string): void => {
    if (value.length < MIN_REDACTED_LENGTH) return;
    found.add(value);
    for (const encoded of urlEncodings(value)) {
      found.add(encoded);
      // Hex digits in either case: `%2f` is `%2F` to every decoder.
      found.add(encoded.replace(/%[0-9A-F]{2}/g, (escape) => escape.toLowerCase()));
    }
    const escaped = JSON.stringify(value).slice(1, -1);
    found.add(escaped);
    // Python's json.dumps: non-ASCII as \uXXXX. Go's json.Marshal: <, > and & (and U+2028/9) as \uXXXX, the rest as is.
    found.add(escaped.replace(/[\u0080-\uffff]/g, unicodeEscape));
    found.add(escaped.replace(/[<>&\u2028\u2029]/g, unicodeEscape));
  };
  for (const value of values) {
    add(value);
    for (const part of value.split(/\s+/)) if (part.length >= MIN_REDACTED_PART && part !== value) add(part);
  }
  return [...found].sort((a, b) => b.length - a.length);
}

/** `\uXXXX` of one UTF-16 unit, lower-case hex as JSON encoders write it. */
const unicodeEscape = (c: string): string => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;

/**
 * The ways a URL or form encoder writes `value`: JavaScript's
 * encodeURIComponent; RFC 3986's strict form (also `!'()*`), as Python's
 * `quote` writes it, with and without `/` left as is (its default); and form
 * encoding (`+` for a space), as URLSearchParams and Python's `quote_plus` do.
 */
function urlEncodings(value: string): string[] {
  const component = encodeURIComponent(value);
  const strict = component.replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
  const form = new URLSearchParams({ v: value }).toString().slice(2);
  return [component, strict, strict.replace(/%2F/g, '/'), strict.replace(/%20/g, '+'), form];
}

/** What a secret shows instead, wherever a text that may hold one is shown (a server's stderr, an upstream's error). */
export const REDACTED = '[redacted]';

/** `text` with every occurrence of each of `secrets` replaced by {@link REDACTED}. */
export function redactSecrets(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const secret of secrets) out = out.split(secret).join(REDACTED);
  return out;
}

/**
 * `value`, a message a server sent (a result, a listing), with every
 * occurrence of each of `secrets` in its strings and keys replaced by
 * {@link REDACTED}: changed in place, since it is the worker's own parse of
 * the message, and walked with a stack of its own, since a server may nest it
 * deep. A server that echoes the token it was given (in an error's text, a
 * debug field) must not put it into call records, the audit or a caller's
 * answer. Only the values themselves are found: a server set on leaking its
 * secret can encode it, and only its sandbox keeps it from doing so.
 */
export function redactJson<T>(value: T, secrets: readonly string[]): T {
  if (secrets.length === 0) return value;
  const holds = (text: string): boolean => secrets.some((secret) => text.includes(secret));
  if (typeof value === 'string') return (holds(value) ? redactSecrets(value, secrets) : value) as T;
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const node = stack.pop();
    if (typeof node !== 'object' || node === null) continue;
    if (Array.isArray(node)) {
      for (let i = 0; i < node.length; i += 1) {
        const item: unknown = node[i];
        if (typeof item === 'string') {
          if (holds(item)) node[i] = redactSecrets(item, secrets);
        } else if (typeof item === 'object' && item !== null) stack.push(item);
      }
      continue;
    }
    const record = node as Record<string, unknown>;
    for (const key of Object.keys(record)) {
      const item = record[key];
      if (typeof item === 'string') {
        if (holds(item)) record[key] = redactSecrets(item, secrets);
      } else if (typeof item === 'object' && item !== null) stack.push(item);
      if (holds(key)) {
        // The value as redacted just above, not `item`, read before: a string under a secret key is a secret too.
        const redacted = record[key];
        delete record[key];
        record[redactSecrets(key, secrets)] = redacted;
      }
    }
  }
  return value;
}
