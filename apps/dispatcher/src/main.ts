/**
 * `forge-dispatcher`: the fleet's HTTP front door. Reads REDIS_URL, PORT,
 * HOST and the FORGE_* variables (see env.ts). Stateless: run as many as you like.
 */
import { ConfigInvalidError, runMain, secretFromEnv, TokenVerifier } from '@forge-fleet/shared';
import { setupTracing } from '@forge-fleet/telemetry';
import { pino } from 'pino';
import { createDispatcher } from './dispatcher.js';
import { type LoadedPolicy, loadPolicyFile, policyFromEnv } from './approvals/policy-file.js';
import { type DispatcherEnv, parseDispatcherEnv, tokenPublicKeyPem } from './env.js';
import { type DoorOptions, resolveDoorOptions } from './http/door-options.js';

/** The policy: from FORGE_POLICY_FILE, or from the environment's separate settings — never a mix of both. */
function policyOf(env: Readonly<DispatcherEnv>): LoadedPolicy {
  if (env.FORGE_POLICY_FILE === undefined) {
    return policyFromEnv({ approval: env.FORGE_APPROVAL, scopes: env.FORGE_SCOPES, defaultScope: env.FORGE_DEFAULT_SCOPE, approvalDeadlineMs: env.FORGE_APPROVAL_DEADLINE_MS });
  }
  const alsoSet = ['FORGE_APPROVAL', 'FORGE_SCOPES', 'FORGE_DEFAULT_SCOPE', 'FORGE_APPROVAL_DEADLINE_MS'].filter((name) => (process.env[name] ?? '') !== '');
  if (alsoSet.length > 0) throw new ConfigInvalidError('dispatcher environment', [`FORGE_POLICY_FILE replaces ${alsoSet.join(', ')}: move those settings into the policy file`]);
  return loadPolicyFile(env.FORGE_POLICY_FILE);
}

/** The HTTP doors' options from the environment; unset ones take their defaults (http/door-options.ts). */
function doorOptionsOf(env: Readonly<DispatcherEnv>): Readonly<DoorOptions> {
  const set = <K extends string, V>(key: K, value: V | undefined) => (value === undefined ? {} : ({ [key]: value } as Record<K, V>));
  return resolveDoorOptions({
    listenHost: env.HOST,
    ...set('allowedHosts', env.FORGE_ALLOWED_HOSTS),
    ...set('allowedOrigins', env.FORGE_ALLOWED_ORIGINS),
    ...set('headersTimeoutMs', env.FORGE_HEADERS_TIMEOUT_MS),
    ...set('bodyTimeoutMs', env.FORGE_BODY_TIMEOUT_MS),
    ...set('maxConnections', env.FORGE_MAX_CONNECTIONS),
    ...set('maxUnauthenticatedConnections', env.FORGE_MAX_UNAUTHENTICATED_CONNECTIONS),
  });
}

/**
 * Why the HTTP port could not be opened, as a setting to change (one line from runMain) rather than Node's
 * stack trace; other failures are returned as they are.
 */
function listenFailure(error: unknown, env: Pick<DispatcherEnv, 'PORT' | 'HOST'>): unknown {
  const code = typeof error === 'object' && error !== null ? (error as { code?: unknown }).code : undefined;
  const where = `${env.HOST.includes(':') ? `[${env.HOST}]` : env.HOST}:${env.PORT}`;
  const problem =
    code === 'EADDRINUSE'
      ? `PORT: ${where} is in use (another process listens there); set PORT to a free port, or stop that process`
      : code === 'EACCES'
        ? `PORT: not allowed to listen on ${where} (ports below 1024 need privileges); set PORT to a port above 1023`
        : code === 'EADDRNOTAVAIL'
          ? `HOST: ${env.HOST} is not an address of this machine; set HOST=127.0.0.1 (this machine only) or 0.0.0.0 (every interface)`
          : undefined;
  return problem === undefined ? error : new ConfigInvalidError('dispatcher environment', [problem], { cause: error });
}

runMain('forge-dispatcher', async () => {
  const env = parseDispatcherEnv(process.env);
  const signingSecret = secretFromEnv(process.env, 'FORGE_SIGNING_SECRET', 'dispatcher environment');
  const pem = tokenPublicKeyPem(env);
  let tokens: TokenVerifier | undefined;
  try {
    tokens = pem === undefined ? undefined : new TokenVerifier(pem, { audience: env.FORGE_TOKEN_AUDIENCE, ...(env.FORGE_TOKEN_CLOCK_SKEW_S === undefined ? {} : { clockSkewSeconds: env.FORGE_TOKEN_CLOCK_SKEW_S }) });
  } catch (error) {
    throw new ConfigInvalidError('dispatcher environment', ['FORGE_TOKEN_PUBLIC_KEY: not an Ed25519 public key in SPKI PEM form (`forge keys init` writes one)'], { cause: error });
  }
  const log = pino({
    level: env.LOG_LEVEL,
    base: { app: 'forge-dispatcher', pid: process.pid },
    redact: ['req.headers.authorization', '*.authorization'],
  });
  const tracing = await setupTracing('forge-dispatcher');
  const dispatcher = await createDispatcher({
    redis: env.REDIS_URL,
    prefix: env.FORGE_PREFIX,
    retentionMs: env.FORGE_RESULT_RETENTION_MS,
    bodyLimit: env.FORGE_BODY_LIMIT_BYTES,
    limits: { maxBytes: env.FORGE_MAX_ARGUMENT_BYTES, maxDepth: env.FORGE_MAX_JSON_DEPTH },
    ...(env.FORGE_AUDIT_REDIS_URL === undefined ? {} : { auditRedis: env.FORGE_AUDIT_REDIS_URL }),
    policy: policyOf(env),
    tokens,
    devMode: env.FORGE_DEV_MODE,
    catalogRefreshMs: env.FORGE_CATALOG_REFRESH_MS,
    signingSecret,
    log,
    tracing,
    doors: doorOptionsOf(env),
  });
  let address: string;
  try {
    address = await dispatcher.app.listen({ port: env.PORT, host: env.HOST });
  } catch (error) {
    await dispatcher.close().catch(() => undefined);
    await tracing.shutdown().catch(() => undefined);
    throw listenFailure(error, env);
  }
  if (env.FORGE_DEV_MODE) log.warn('FORGE_DEV_MODE is on: requests without a token are served as an anonymous agent');
  log.info({ address, id: dispatcher.id }, 'dispatcher listening');
  return { log, stop: () => dispatcher.close().finally(() => tracing.shutdown()), forceExitAfterMs: env.FORGE_SHUTDOWN_GRACE_MS };
});
