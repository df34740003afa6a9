import { readFileSync } from 'node:fs';
import { ConfigInvalidError, MAX_WAIT_MS } from '@forge-fleet/shared';
import { z } from 'zod';

/** Addresses whose listener only this machine can reach: the Host check then defaults to loopback names. */
const LOOPBACK_LISTEN = /^(127\.\d+\.\d+\.\d+|::1|\[::1\]|localhost)$/i;

/** The Host names a loopback listener serves by default (any port). */
export const LOOPBACK_HOSTS: readonly string[] = Object.freeze(['localhost', '127.0.0.1', '[::1]']);

/**
 * This process's soft limit on open files (Linux: /proc/self/limits), or
 * `undefined` where it cannot be read. The connection caps default below it,
 * so a flood of connections meets a 503, never EMFILE.
 */
function openFileLimit(): number | undefined {
  try {
    const line = /^Max open files\s+(\d+|unlimited)/m.exec(readFileSync('/proc/self/limits', 'utf8'));
    return line?.[1] === undefined || line[1] === 'unlimited' ? undefined : Number(line[1]);
  } catch {
    return undefined;
  }
}

/** Descriptors kept for Redis connections, logs and files: not given to HTTP connections. */
const RESERVED_FDS = 64;

/**
 * How the dispatcher's HTTP doors treat connections and requests before any
 * route runs (docs/http-api.md, "Connections and requests"). Parsed once, with
 * every default here.
 */
export const DoorOptions = z
  .object({
    /** The address the dispatcher listens on (HOST). @defaultValue "127.0.0.1" */
    listenHost: z.string().default('127.0.0.1'),
    /**
     * Host names (`name` for any port, `name:port` for one; `*` for any) that `/v1` and `/mcp` answer to.
     * @defaultValue {@link LOOPBACK_HOSTS} on a loopback listener, any Host otherwise
     */
    allowedHosts: z.array(z.string().min(1)).optional(),
    /** Browser origins (`scheme://host[:port]`, or `*`) allowed besides the dispatcher's own. @defaultValue [] */
    allowedOrigins: z.array(z.string().min(1)).default([]),
    /** Longest a client may take to send a request's headers. @defaultValue 10000 */
    headersTimeoutMs: z.number().int().positive().default(10_000),
    /**
     * Longest a client may take to send a request's body once its headers are in; waiting for a
     * result (`?wait=`) comes after and is not timed. A call stream's body may stay open its whole
     * life on top (takes calls for 60 s, answers them within `MAX_WAIT_MS`). @defaultValue 30000
     */
    bodyTimeoutMs: z.number().int().positive().default(30_000),
    /** Most connections open at once. @defaultValue 4096, and below the process's open-file limit */
    maxConnections: z.number().int().positive().optional(),
    /** Most connections open at once that have not yet shown a valid token. @defaultValue 512, and at most maxConnections */
    maxUnauthenticatedConnections: z.number().int().positive().optional(),
    /**
     * How long a new connection has to send its request before it may be closed to keep the unauthenticated
     * connections under their cap (a cold burst of real clients is accepted faster than their requests are read).
     * @defaultValue a tenth of headersTimeoutMs (1000 with its default)
     */
    unauthenticatedGraceMs: z.number().int().nonnegative().optional(),
  })
  .transform((o) => {
    const fds = openFileLimit();
    const maxConnections = o.maxConnections ?? Math.max(64, Math.min(4096, fds === undefined ? 4096 : fds - RESERVED_FDS));
    return {
      ...o,
      allowedHosts: o.allowedHosts ?? (LOOPBACK_LISTEN.test(o.listenHost) ? [...LOOPBACK_HOSTS] : ['*']),
      maxConnections,
      maxUnauthenticatedConnections: o.maxUnauthenticatedConnections ?? Math.min(512, maxConnections),
      unauthenticatedGraceMs: o.unauthenticatedGraceMs ?? Math.floor(o.headersTimeoutMs / 10),
    };
  })
  .refine((o) => o.maxUnauthenticatedConnections <= o.maxConnections, { message: 'maxUnauthenticatedConnections is more than maxConnections', path: ['maxUnauthenticatedConnections'] });
export type DoorOptions = z.output<typeof DoorOptions>;

/** @throws ConfigInvalidError naming each bad option. */
export function resolveDoorOptions(input: z.input<typeof DoorOptions> = {}): Readonly<DoorOptions> {
  const r = DoorOptions.safeParse(input);
  if (!r.success) throw new ConfigInvalidError('DoorOptions', r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`));
  return Object.freeze(r.data);
}

/**
 * How long a call stream's body may stay open beyond the body timeout: it takes
 * calls for `streamMaxAgeMs`, and its last call may wait `MAX_WAIT_MS` for an answer
 * while the client keeps the body open.
 */
export function streamBodyTimeoutMs(o: Pick<DoorOptions, 'bodyTimeoutMs'>, streamMaxAgeMs: number): number {
  return streamMaxAgeMs + MAX_WAIT_MS + o.bodyTimeoutMs;
}
