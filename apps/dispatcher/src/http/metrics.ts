import type { FleetMetrics } from '@forge-fleet/telemetry';
import type { FastifyInstance } from 'fastify';

/**
 * `/metrics`: Prometheus text exposition, unauthenticated as scrapers expect.
 * It shows tool names and counts, not arguments or callers; keep the
 * dispatcher's port off the public internet, or scrape through a network
 * policy, as for any Prometheus target.
 */
export function metricsRoutes(metrics: FleetMetrics) {
  return (app: FastifyInstance): void => {
    app.get('/metrics', async (_request, reply) => {
      const { contentType, body } = await metrics.scrape();
      return reply.header('content-type', contentType).header('cache-control', 'no-store').send(body);
    });
  };
}
