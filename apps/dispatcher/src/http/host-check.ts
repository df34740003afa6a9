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
    const parsed = host === undefined ? undefined : parseHost(host);
    if (!this.#anyHost && (parsed === undefined || !(this.#hosts.has(parsed.hostname) || this.#hosts.has(`${parsed.hostname}:${parsed.port}`)))) {
      throw new HostNotAllowedError(host ?? '(none)', this.#described);
    }
    if (origin === undefined || this.#anyOrigin) return;
    const normalised = origin.toLowerCase();
    if (this.#origins.has(normalised)) return;
    // The same origin: the console (/ui) calling /v1 from the page the dispatcher served.
    const match = /^https?:\/\/([^/]+)$/.exec(normalised);
    if (match !== null && host !== undefined && match[1] === host.toLowerCase()) return;
    throw new OriginNotAllowedError(origin);
  }
}
