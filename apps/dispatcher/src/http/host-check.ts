import { HostNotAllowedError, OriginNotAllowedError } from '@forge-fleet/shared';
import type { DoorOptions } from './door-options.js';

/** A Host header (or an origin's host) as hostname and port; `undefined` when it is no host at all. */
function parseHost(host: string): { hostname: string; port: string } | undefined {
  if (host === '' || /[\s/?#@\\]/.test(host)) return undefined;
  try {
    const url = new URL(`http://${host}`);
    return { hostname: url.hostname.toLowerCase(), port: url.port };
  } catch {
    return undefined;
  }
}

/** How many distinct Host headers a {@link HostCheck} remembers. */
const MAX_JUDGED_HOSTS = 256;

/**
 * The Host and Origin checks of `/v1` and `/mcp`, against DNS rebinding and
 * pages of other sites: a browser page on `evil.example.com` whose name now
 * resolves to the dispatcher sends `Host: evil.example.com`, and any page sends
 * its own `Origin`.
 */
export class HostCheck {
  readonly #anyHost: boolean;
  /** `name` (any port) or `name:port`, lower case. */
  readonly #hosts: ReadonlySet<string>;
  readonly #anyOrigin: boolean;
  readonly #origins: ReadonlySet<string>;
  readonly #described: string;
  /**
   * Host headers already judged, and whether each is served: a client sends the
   * same one with every request, and parsing it (a URL) per request is a cost
   * on every call. Bounded: a flood of made-up hosts clears it, never grows it.
   */
  readonly #judged = new Map<string, boolean>();

  constructor(o: Pick<DoorOptions, 'allowedHosts' | 'allowedOrigins'>) {
    this.#anyHost = o.allowedHosts.includes('*');
    this.#hosts = new Set(o.allowedHosts.map((h) => h.toLowerCase()));
    this.#anyOrigin = o.allowedOrigins.includes('*');
    this.#origins = new Set(o.allowedOrigins.map((h) => h.toLowerCase().replace(/\/+$/, '')));
    this.#described = `it serves ${o.allowedHosts.join(', ')}`;
  }

  /**
   * @throws HostNotAllowedError for a Host it does not serve;
   *   OriginNotAllowedError for an `Origin` that is neither this Host's own nor allowed (no `Origin`: not a browser, not checked).
   */
  check(host: string | undefined, origin: string | undefined): void {
    if (!this.#anyHost && (host === undefined || !this.#serves(host))) throw new HostNotAllowedError(host ?? '(none)', this.#described);
    if (origin === undefined || this.#anyOrigin) return;
    const normalised = origin.toLowerCase();
    if (this.#origins.has(normalised)) return;
    // The same origin: the console (/ui) calling /v1 from the page the dispatcher served.
    const match = /^https?:\/\/([^/]+)$/.exec(normalised);
    if (match !== null && host !== undefined && match[1] === host.toLowerCase()) return;
    throw new OriginNotAllowedError(origin);
  }

  #serves(host: string): boolean {
    let served = this.#judged.get(host);
    if (served === undefined) {
      const parsed = parseHost(host);
      served = parsed !== undefined && (this.#hosts.has(parsed.hostname) || this.#hosts.has(`${parsed.hostname}:${parsed.port}`));
      if (this.#judged.size >= MAX_JUDGED_HOSTS) this.#judged.clear();
      this.#judged.set(host, served);
    }
    return served;
  }
}
