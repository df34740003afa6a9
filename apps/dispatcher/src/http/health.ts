import type { FastifyInstance } from 'fastify';

/** `/healthz`: the process is up. `/readyz`: it can reach Redis (load balancers route on this). */
export function healthRoutes(ready: () => Promise<boolean>) {
  return (app: FastifyInstance): void => {
    app.get('/healthz', () => ({ ok: true }));
    app.get('/readyz', async (_request, reply) => {
      const ok = await ready().catch(() => false);
      return reply.status(ok ? 200 : 503).send({ ok });
    });
  };
}
