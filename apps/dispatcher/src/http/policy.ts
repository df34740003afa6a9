import type { FastifyInstance } from 'fastify';
import type { LoadedPolicy } from '../approvals/policy-file.js';
import { type Authenticator, requireRole } from '../auth/authenticator.js';

/** `GET /v1/policy`: the effective policy and where it came from (admin tokens only). */
export function policyRoutes(loaded: LoadedPolicy, auth: Authenticator) {
  return (app: FastifyInstance): void => {
    app.get('/v1/policy', async (request) => {
      requireRole(await auth.caller(request.headers), 'read the policy', ['admin']);
      return { source: loaded.source, policy: loaded.policy };
    });
  };
}
