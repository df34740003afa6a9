import { z } from 'zod';

/** One node a Redis Cluster client starts from (it learns the others from the cluster). */
export interface RedisNode {
  readonly host: string;
  readonly port: number;
}

/**
 * Where a fleet's Redis is, as `REDIS_URL` names it:
 * - `server`: one Redis server. The URL is handed to ioredis untouched
 *   (`redis://…`, `rediss://…`, a socket path), exactly as before clusters existed.
 * - `cluster`: a Redis Cluster, named `redis+cluster://[user:password@]host1:port1,host2:port2,…`
 *   (`rediss+cluster://` for TLS). A few seed nodes are enough: the client reads
 *   the cluster's slot map from the first one that answers. See docs/cluster.md.
 */
export type RedisTarget =
  | { readonly kind: 'server'; readonly url: string }
  | {
      readonly kind: 'cluster';
      readonly url: string;
      readonly nodes: readonly RedisNode[];
      readonly username?: string;
      readonly password?: string;
      readonly tls: boolean;
    };

const CLUSTER_URL = /^(rediss?)\+cluster:\/\/(.*)$/i;

const EXAMPLE = 'redis+cluster://10.0.0.1:7000,10.0.0.2:7000,10.0.0.3:7000';

/**
 * Reads a Redis URL into a {@link RedisTarget}; anything that is not a
 * cluster URL is a single server's URL, left for ioredis to read.
 * @returns the target, or the problems with a malformed cluster URL.
 */
export function parseRedisTarget(url: string): RedisTarget | { readonly problems: readonly string[] } {
  const cluster = CLUSTER_URL.exec(url);
  if (cluster === null) return Object.freeze({ kind: 'server', url });
  const scheme = cluster[1]!.toLowerCase();
  const rest = cluster[2]!;
  // The path may only be empty or "/" (a cluster has database 0 only); no query options.
  const authority = rest.replace(/\/$/, '');
  if (/[/?#]/.test(authority)) return { problems: [`a cluster URL has nodes only, no database, path or options (a Redis Cluster has database 0 alone): ${EXAMPLE}`] };
  const at = authority.lastIndexOf('@');
  const userinfo = at === -1 ? undefined : authority.slice(0, at);
  const hosts = (at === -1 ? authority : authority.slice(at + 1)).split(',');
  const problems: string[] = [];
  const nodes: RedisNode[] = [];
  for (const entry of hosts) {
    // WHATWG URL reads one host:port (IPv6 in brackets) and checks the port's range.
    let parsed: URL | undefined;
    try {
      parsed = entry === '' ? undefined : new URL(`redis://${entry}`);
    } catch {
      parsed = undefined;
    }
    if (parsed === undefined || parsed.hostname === '' || parsed.username !== '' || parsed.pathname !== '' || !/:\d+$/.test(entry)) {
      problems.push(`'${entry}' is not a host:port node; list the cluster's nodes as host:port separated by commas: ${EXAMPLE}`);
      continue;
    }
    nodes.push(Object.freeze({ host: parsed.hostname.replace(/^\[|\]$/g, ''), port: Number(parsed.port) }));
  }
  if (problems.length > 0) return { problems };
  let username: string | undefined;
  let password: string | undefined;
  if (userinfo !== undefined) {
    // The same reading as ioredis gives `redis://user:password@host`: percent-decoded, either part may be empty.
    const credentials = new URL(`redis://${userinfo}@x`);
    username = decodeURIComponent(credentials.username);
    password = decodeURIComponent(credentials.password);
  }
  return Object.freeze({
    kind: 'cluster',
    url,
    nodes: Object.freeze(nodes),
    ...(username === undefined || username === '' ? {} : { username }),
    ...(password === undefined || password === '' ? {} : { password }),
    tls: scheme === 'rediss',
  });
}

const MISSING = `set REDIS_URL to the fleet Redis, e.g. redis://127.0.0.1:6379 (a Redis Cluster: ${EXAMPLE})`;

/**
 * `REDIS_URL` (or another Redis URL setting), required, read once into a
 * {@link RedisTarget}: a single server's URL as ioredis takes it, or a
 * `redis+cluster://` list of cluster nodes.
 */
export const RedisUrl = z
  .string({ error: MISSING })
  .min(1, MISSING)
  .transform((url, ctx): RedisTarget => {
    const target = parseRedisTarget(url);
    if ('kind' in target) return target;
    for (const message of target.problems) ctx.addIssue({ code: 'custom', message });
    return z.NEVER;
  });
