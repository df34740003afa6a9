import type { FastifyInstance } from 'fastify';
import type { Authenticator } from '../auth/authenticator.js';
import type { CatalogView } from '../catalog/catalog-view.js';

/** `GET /v1/tools`: the tools some live worker serves, filtered by the caller's scope (any role may list). */
export function toolRoutes(catalog: CatalogView, auth: Authenticator) {
  return (app: FastifyInstance): void => {
    app.get('/v1/tools', async (request) => {
      const { scope } = await auth.caller(request.headers);
      return { tools: scope.scope.filter(catalog.list()) };
    });
  };
}
