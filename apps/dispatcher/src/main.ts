/**
 * `forge-dispatcher`: the fleet's HTTP front door. Reads REDIS_URL, PORT,
 * HOST and the FORGE_* variables (see env.ts). Stateless: run as many as you like.
 */
import { isFleetError } from '@forge-fleet/shared';
import { pino } from 'pino';
import { createDispatcher } from './dispatcher.js';
import { parseDispatcherEnv } from './env.js';

async function main(): Promise<void> {
  const env = parseDispatcherEnv(process.env);
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
    retry: { attempts: env.FORGE_RETRY_ATTEMPTS, backoffMs: env.FORGE_RETRY_BACKOFF_MS },
    log,
  });
  const address = await dispatcher.app.listen({ port: env.PORT, host: env.HOST });
  log.info({ address, id: dispatcher.id }, 'dispatcher listening');

  const shutdown = (signal: string): void => {
    log.info({ signal }, 'shutting down');
    const force = setTimeout(() => {
      log.warn('grace period over: exiting with requests still open');
      process.exit(1);
    }, env.FORGE_SHUTDOWN_GRACE_MS);
    force.unref();
    dispatcher.close().then(
      () => process.exit(0),
      (err: unknown) => {
        log.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.once('SIGTERM', () => shutdown('SIGTERM'));
  process.once('SIGINT', () => shutdown('SIGINT'));
}

main().catch((error: unknown) => {
  const line = isFleetError(error) ? `forge-dispatcher: ${error.code}: ${error.message}` : `forge-dispatcher: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`;
  process.stderr.write(`${line}\n`);
  process.exit(1);
});
