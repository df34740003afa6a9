import type { QueueStatsReader } from '@forge-fleet/store';
import type { FastifyInstance } from 'fastify';
import { type Authenticator, requireRole } from '../auth/authenticator.js';

/**
 * `GET /v1/queues`: job counts and live workers per tier and pool queue
 * (approver or admin tokens: the people who watch the fleet; an agent has no
 * business seeing other agents' load).
 */
export function queueRoutes(stats: QueueStatsReader, auth: Authenticator) {
  return (app: FastifyInstance): void => {
    app.get('/v1/queues', async (request) => {
      requireRole(await auth.caller(request.headers), 'read queue statistics', ['approver', 'admin']);
      return stats.read();
    });
  };
}
