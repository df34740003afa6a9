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

/** The policy: from FORGE_POLICY_FILE, or from the environment's separate settings — never a mix of both. */
function policyOf(env: Readonly<DispatcherEnv>): LoadedPolicy {
  if (env.FORGE_POLICY_FILE === undefined) {
    return policyFromEnv({ approval: env.FORGE_APPROVAL, scopes: env.FORGE_SCOPES, defaultScope: env.FORGE_DEFAULT_SCOPE, approvalDeadlineMs: env.FORGE_APPROVAL_DEADLINE_MS });
  }
  const alsoSet = ['FORGE_APPROVAL', 'FORGE_SCOPES', 'FORGE_DEFAULT_SCOPE', 'FORGE_APPROVAL_DEADLINE_MS'].filter((name) => (process.env[name] ?? '') !== '');
  if (alsoSet.length > 0) throw new ConfigInvalidError('dispatcher environment', [`FORGE_POLICY_FILE replaces ${alsoSet.join(', ')}: move those settings into the policy file`]);
  return loadPolicyFile(env.FORGE_POLICY_FILE);
}

runMain('forge-dispatcher', async () => {
  const env = parseDispatcherEnv(process.env);
  const signingSecret = secretFromEnv(process.env, 'FORGE_SIGNING_SECRET', 'dispatcher environment');
  const pem = tokenPublicKeyPem(env);
  let tokens: TokenVerifier | undefined;
  try {
    tokens = pem === undefined ? undefined : new TokenVerifier(pem, { audience: env.FORGE_TOKEN_AUDIENCE });
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
  });
  const address = await dispatcher.app.listen({ port: env.PORT, host: env.HOST });
  if (env.FORGE_DEV_MODE) log.warn('FORGE_DEV_MODE is on: requests without a token are served as an anonymous agent');
  log.info({ address, id: dispatcher.id }, 'dispatcher listening');
  return { log, stop: () => dispatcher.close().finally(() => tracing.shutdown()), forceExitAfterMs: env.FORGE_SHUTDOWN_GRACE_MS };
});
