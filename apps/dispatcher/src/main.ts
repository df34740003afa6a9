/**
 * `forge-dispatcher`: the fleet's HTTP front door. Reads REDIS_URL, PORT,
 * HOST and the FORGE_* variables (see env.ts). Stateless: run as many as you like.
 */
import { runMain, secretFromEnv } from '@forge-fleet/shared';
import { pino } from 'pino';
import { createDispatcher } from './dispatcher.js';
import { parseDispatcherEnv } from './env.js';

runMain('forge-dispatcher', async () => {
  const env = parseDispatcherEnv(process.env);
  const signingSecret = secretFromEnv(process.env, 'FORGE_SIGNING_SECRET', 'dispatcher environment');
  const log = pino({
    level: env.LOG_LEVEL,
    base: { app: 'forge-dispatcher', pid: process.pid },
    redact: ['req.headers.authorization', '*.authorization'],
  });
  const dispatcher = await createDispatcher({
    redisUrl: env.REDIS_URL,
    prefix: env.FORGE_PREFIX,
    retentionMs: env.FORGE_RESULT_RETENTION_MS,
    bodyLimit: env.FORGE_BODY_LIMIT_BYTES,
    approval: env.FORGE_APPROVAL,
    apiKeys: env.FORGE_API_KEYS,
    scopes: env.FORGE_SCOPES,
    defaultScope: env.FORGE_DEFAULT_SCOPE,
    catalogRefreshMs: env.FORGE_CATALOG_REFRESH_MS,
    signingSecret,
    log,
  });
  const address = await dispatcher.app.listen({ port: env.PORT, host: env.HOST });
  log.info({ address, id: dispatcher.id }, 'dispatcher listening');
  return { log, stop: () => dispatcher.close(), forceExitAfterMs: env.FORGE_SHUTDOWN_GRACE_MS };
});
