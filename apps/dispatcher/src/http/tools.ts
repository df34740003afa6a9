import type { ScopeRegistry } from '@forge-fleet/shared';
import type { FastifyInstance } from 'fastify';
import type { ApiKeys } from '../approvals/policy.js';
import type { CatalogView } from '../catalog/catalog-view.js';
import { callerOf } from './calls.js';

/** `GET /v1/tools`: the tools some live worker serves, filtered by the caller's scope. */
export function toolRoutes(catalog: CatalogView, scopes: ScopeRegistry, keys: ApiKeys) {
  return (app: FastifyInstance): void => {
    app.get('/v1/tools', (request) => {
      const { scope } = callerOf(request, scopes, keys);
      return { tools: scope.scope.filter(catalog.list()) };
    });
  };
}
