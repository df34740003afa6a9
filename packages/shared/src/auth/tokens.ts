import { createPublicKey, generateKeyPairSync, type KeyObject, createPrivateKey } from 'node:crypto';
import { errors as joseErrors, jwtVerify, SignJWT } from 'jose';
import { z } from 'zod';
import { UnauthenticatedError } from '../errors/errors.js';

/** What a token's holder may do: call tools (agent), decide approvals (approver), or everything (admin). */
export const Role = z.enum(['agent', 'approver', 'admin']);
export type Role = z.infer<typeof Role>;

/** The audience tokens are minted for unless a fleet names its own. */
export const DEFAULT_TOKEN_AUDIENCE = 'forge-fleet';

/**
 * An agent capability token's claims: who (`sub`), for which fleet (`aud`),
 * until when (`exp`), in which role, under which scope (a task type the
 * fleet's policy names, or tool patterns of its own), and which Host-tier
 * tools it grants (names or `prefix.*` patterns).
 */
export const TokenClaims = z.object({
  sub: z.string().min(1),
  aud: z.union([z.string(), z.array(z.string())]),
  exp: z.number().int(),
  iat: z.number().int().optional(),
  role: Role.default('agent'),
  /** A task type whose scope the fleet's policy defines. */
  task: z.string().min(1).optional(),
  /** Tool patterns this token may list and call; overrides `task`. */
  scope: z.array(z.string().min(1)).optional(),
  /** Host-tier tools (or `prefix.*` patterns) the tier policy lets this token run. */
  grants: z.array(z.string().min(1)).default([]),
});
export type TokenClaims = z.infer<typeof TokenClaims>;

/** What a token is minted with. */
export interface MintOptions {
  readonly subject: string;
  readonly role?: Role;
  readonly task?: string;
  readonly scope?: readonly string[];
  readonly grants?: readonly string[];
  readonly audience?: string;
  /** @defaultValue 3600 */
  readonly expiresInSeconds?: number;
}

/** A fresh Ed25519 key pair for minting (private) and verifying (public) tokens, as PEM text. */
export function generateTokenKeys(): { privateKeyPem: string; publicKeyPem: string } {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  return {
    privateKeyPem: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
    publicKeyPem: publicKey.export({ type: 'spki', format: 'pem' }).toString(),
  };
}

/** Mints an EdDSA-signed token. */
export async function mintToken(privateKeyPem: string | KeyObject, options: MintOptions): Promise<string> {
  const key = typeof privateKeyPem === 'string' ? createPrivateKey(privateKeyPem) : privateKeyPem;
  const claims: Record<string, unknown> = { role: options.role ?? 'agent', grants: [...(options.grants ?? [])] };
  if (options.task !== undefined) claims.task = options.task;
  if (options.scope !== undefined) claims.scope = [...options.scope];
  return new SignJWT(claims)
    .setProtectedHeader({ alg: 'EdDSA', typ: 'JWT' })
    .setSubject(options.subject)
    .setAudience(options.audience ?? DEFAULT_TOKEN_AUDIENCE)
    .setIssuedAt()
    .setExpirationTime(Math.floor(Date.now() / 1000) + (options.expiresInSeconds ?? 3600))
    .sign(key);
}

/**
 * How far ahead of this machine's clock a token's `iat` (issued at) and `nbf`
 * (not before) may be: clocks of the minting and the verifying machine drift a little.
 */
export const DEFAULT_CLOCK_SKEW_SECONDS = 60;

/** Why jose refused a token, in words that say what to do. */
function refusal(error: unknown, skewSeconds: number): string {
  if (error instanceof joseErrors.JWTExpired) return 'the token has expired; mint a new one';
  if (error instanceof joseErrors.JWTClaimValidationFailed && error.claim === 'nbf') {
    return `the token is not valid yet (its "nbf" claim is more than ${skewSeconds} s ahead of this dispatcher's clock); check the clock of the machine that minted it, or wait until it is valid`;
  }
  if (error instanceof joseErrors.JWTClaimValidationFailed) return `the token's "${error.claim}" claim is not valid here (${error.reason}); mint one for this fleet`;
  if (error instanceof joseErrors.JWSSignatureVerificationFailed) return 'the token signature does not verify; it was not minted with this fleet\'s key';
  if (error instanceof joseErrors.JOSEAlgNotAllowed) return 'the token must be signed with EdDSA';
  return 'the token is malformed; send `Authorization: Bearer <JWT>` with a token from `forge token mint`';
}

/**
 * Verifies tokens against the fleet's public key. Verified tokens are kept
 * (up to `cacheSize`, until they expire): an agent sends the same token with
 * every request, and an EdDSA verification costs ~0.2 ms here.
 */
export class TokenVerifier {
  readonly #key: KeyObject;
  readonly #audience: string;
  readonly #cache = new Map<string, TokenClaims>();
  readonly #cacheSize: number;
  readonly #skewSeconds: number;

  /**
   * @param options.clockSkewSeconds how far ahead of this clock `iat` and `nbf` may be; `exp` is never stretched. @defaultValue {@link DEFAULT_CLOCK_SKEW_SECONDS}
   */
  constructor(publicKeyPem: string | KeyObject, options: { audience?: string; cacheSize?: number; clockSkewSeconds?: number } = {}) {
    this.#key = typeof publicKeyPem === 'string' ? createPublicKey(publicKeyPem) : publicKeyPem;
    this.#audience = options.audience ?? DEFAULT_TOKEN_AUDIENCE;
    this.#cacheSize = options.cacheSize ?? 10_000;
    this.#skewSeconds = options.clockSkewSeconds ?? DEFAULT_CLOCK_SKEW_SECONDS;
  }

  /** @throws UnauthenticatedError saying why the token is refused. */
  async verify(token: string, now = Date.now()): Promise<TokenClaims> {
    const cached = this.#cache.get(token);
    if (cached !== undefined) {
      if (cached.exp * 1000 > now) return cached;
      this.#cache.delete(token);
      throw new UnauthenticatedError('the token has expired; mint a new one');
    }
    let payload: unknown;
    try {
      // jose's tolerance covers `nbf` (and `exp`, which is checked strictly below, as for cached tokens).
      ({ payload } = await jwtVerify(token, this.#key, { audience: this.#audience, algorithms: ['EdDSA'], requiredClaims: ['sub', 'exp'], currentDate: new Date(now), clockTolerance: this.#skewSeconds }));
    } catch (error) {
      throw new UnauthenticatedError(refusal(error, this.#skewSeconds));
    }
    const claims = TokenClaims.safeParse(payload);
    if (!claims.success) throw new UnauthenticatedError(`the token's claims are invalid: ${claims.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
    if (claims.data.exp * 1000 <= now) throw new UnauthenticatedError('the token has expired; mint a new one');
    // jose checks `iat` only against a maximum age; a token minted "in the future" would otherwise live until its `exp`.
    const ahead = claims.data.iat === undefined ? 0 : claims.data.iat - Math.floor(now / 1000);
    if (ahead > this.#skewSeconds) {
      throw new UnauthenticatedError(`the token was issued in the future (its "iat" claim is ${ahead} s ahead of this dispatcher's clock, more than the ${this.#skewSeconds} s of clock skew allowed); check the clock of the machine that minted it and mint a new one`);
    }
    if (this.#cache.size >= this.#cacheSize) this.#cache.delete(this.#cache.keys().next().value!);
    this.#cache.set(token, claims.data);
    return claims.data;
  }
}
