import type { FastifyInstance } from 'fastify';
import type { DecisionAudit } from '../audit/decisions.js';
import type { Authenticator } from '../auth/authenticator.js';
import type { CatalogView } from '../catalog/catalog-view.js';

/** `GET /v1/tools`: the tools some live worker serves, filtered by the caller's scope (any role may list). */
export function toolRoutes(catalog: CatalogView, auth: Authenticator, audit: DecisionAudit) {
  return (app: FastifyInstance): void => {
    app.get('/v1/tools', async (request) => {
      const caller = await auth.caller(request.headers);
      // The scope listed under becomes the caller's `scopeAtListing` in later call entries.
      audit.listed(caller, 'GET /v1/tools');
      return { tools: caller.scope.scope.filter(catalog.list()) };
    });
  };
}
