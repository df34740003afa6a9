import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { FleetMetrics } from './fleet-metrics.js';

/** A worker's small HTTP port: `/metrics` for Prometheus, `/healthz` and `/readyz` for orchestrators' probes. */
export interface MetricsServer {
  /** The port it listens on (the one chosen by the system when asked for 0). */
  readonly port: number;
  close(): Promise<void>;
}

/** What `/readyz` answers: `ok` (200, else 503) and any detail beside it. */
export interface ReadyReport {
  readonly ok: boolean;
  readonly [detail: string]: unknown;
}

/**
 * Serves a worker's metrics and probes. Workers have no HTTP API of their
 * own, so this is plain `node:http` rather than a framework: three GET routes.
 * `ready` says whether the worker takes calls (its queue connection is up),
 * as a boolean or as a report whose `ok` says it and whose other fields
 * (the state of each MCP server, say) are the body of `/readyz`.
 */
export async function serveMetrics(options: { port: number; host?: string; metrics: FleetMetrics; ready: () => Promise<boolean | ReadyReport> | boolean | ReadyReport }): Promise<MetricsServer> {
  const server: Server = createServer((request, response) => {
    const path = (request.url ?? '/').split('?')[0];
    const answer = (status: number, body: string, type = 'application/json'): void => {
      response.writeHead(status, { 'content-type': type, 'cache-control': 'no-store' });
      response.end(body);
    };
    if (request.method !== 'GET' && request.method !== 'HEAD') return answer(405, JSON.stringify({ error: { code: 'BAD_REQUEST', message: 'only GET is served here' } }));
    switch (path) {
      case '/metrics':
        options.metrics.scrape().then(
          ({ contentType, body }) => answer(200, body, contentType),
          (err: unknown) => answer(500, `# metrics could not be collected: ${String(err)}\n`, 'text/plain'),
        );
        return;
      case '/healthz':
        return answer(200, JSON.stringify({ ok: true }));
      case '/readyz':
        Promise.resolve()
          .then(() => options.ready())
          .then(
            (report) => {
              const body = typeof report === 'boolean' ? { ok: report } : report;
              answer(body.ok ? 200 : 503, JSON.stringify(body));
            },
            () => answer(503, JSON.stringify({ ok: false })),
          );
        return;
      default:
        return answer(404, JSON.stringify({ error: { code: 'NOT_FOUND', message: 'served here: /metrics, /healthz, /readyz' } }));
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host ?? '0.0.0.0', () => resolve());
  });
  // Probes and scrapes are short; an idle keep-alive connection must not hold a shutdown.
  server.keepAliveTimeout = 5000;
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
