import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ConfigInvalidError, deriveQueueKey, generateTokenKeys, queueName, secretFromEnv, type Tier } from '@forge-fleet/shared';

/** The files `forge keys init` writes, by role. */
export const KEY_FILES = {
  /** Mints tokens: keep it with whoever issues them, never on dispatchers or workers. */
  tokenPrivate: 'token.key',
  /** Verifies tokens: every dispatcher (FORGE_TOKEN_PUBLIC_KEY_FILE). */
  tokenPublic: 'token.pub',
  /** Signs calls: every dispatcher (FORGE_SIGNING_SECRET_FILE); workers get derived keys only. */
  signingSecret: 'signing.secret',
} as const;

/**
 * Writes a fresh token key pair and call-signing secret into `dir` (secrets
 * readable by their owner only). Refuses to overwrite existing keys unless
 * `force`: replacing them invalidates every token and worker key in use.
 */
export function initKeys(dir: string, force = false): string[] {
  const paths = Object.values(KEY_FILES).map((f) => join(dir, f));
  const existing = paths.filter((p) => existsSync(p));
  if (existing.length > 0 && !force) {
    throw new ConfigInvalidError('forge keys init', [`${existing.join(', ')} already exist; pass --force to replace them (every token and worker key made from them stops working)`]);
  }
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const { privateKeyPem, publicKeyPem } = generateTokenKeys();
  writeFileSync(join(dir, KEY_FILES.tokenPrivate), privateKeyPem, { mode: 0o600 });
  writeFileSync(join(dir, KEY_FILES.tokenPublic), publicKeyPem, { mode: 0o644 });
  writeFileSync(join(dir, KEY_FILES.signingSecret), `${randomBytes(32).toString('base64url')}\n`, { mode: 0o600 });
  return paths;
}

/** The FORGE_CALL_KEY of one queue's workers, from the signing secret file. */
export function workerKey(secretFile: string, prefix: string, tier: Tier, pool?: string): string {
  const secret = secretFromEnv({ FORGE_SIGNING_SECRET_FILE: secretFile }, 'FORGE_SIGNING_SECRET', 'forge keys worker-key');
  return deriveQueueKey(secret, queueName(prefix, tier, pool)).toString('base64url');
}
