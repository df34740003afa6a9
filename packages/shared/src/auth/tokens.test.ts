import { createPrivateKey } from 'node:crypto';
import { SignJWT } from 'jose';
import { describe, expect, it } from 'vitest';
import { generateTokenKeys, mintToken, TokenVerifier } from './tokens.js';

const keys = generateTokenKeys();
const verifier = new TokenVerifier(keys.publicKeyPem);

describe('agent capability tokens', () => {
  it('round-trips subject, role, task, scope and grants', async () => {
    const token = await mintToken(keys.privateKeyPem, { subject: 'agent-1', role: 'approver', task: 'research', scope: ['search.*'], grants: ['db.*'] });
    expect(await verifier.verify(token)).toMatchObject({ sub: 'agent-1', aud: 'forge-fleet', role: 'approver', task: 'research', scope: ['search.*'], grants: ['db.*'] });
  });

  it('defaults to the agent role with no grants', async () => {
    expect(await verifier.verify(await mintToken(keys.privateKeyPem, { subject: 'a' }))).toMatchObject({ role: 'agent', grants: [] });
  });

  it('refuses expired, wrong-audience, foreign-key, malformed and non-EdDSA tokens with UNAUTHENTICATED', async () => {
    const expired = await mintToken(keys.privateKeyPem, { subject: 'a', expiresInSeconds: -10 });
    const otherFleet = await mintToken(keys.privateKeyPem, { subject: 'a', audience: 'another-fleet' });
    const foreign = await mintToken(generateTokenKeys().privateKeyPem, { subject: 'a' });
    const hmac = await new SignJWT({}).setProtectedHeader({ alg: 'HS256' }).setSubject('a').setAudience('forge-fleet').setExpirationTime('1h').sign(new Uint8Array(32));
    const cases: [string, RegExp][] = [
      [expired, /expired/],
      [otherFleet, /"aud" claim/],
      [foreign, /signature does not verify/],
      ['not.a.jwt', /malformed/],
      [hmac, /EdDSA/],
    ];
    for (const [token, reason] of cases) await expect(verifier.verify(token)).rejects.toMatchObject({ code: 'UNAUTHENTICATED', message: expect.stringMatching(reason) as string });
  });

  it('refuses a cached token once it has expired', async () => {
    const token = await mintToken(keys.privateKeyPem, { subject: 'a', expiresInSeconds: 60 });
    await verifier.verify(token);
    await expect(verifier.verify(token, Date.now() + 61_000)).rejects.toMatchObject({ code: 'UNAUTHENTICATED' });
  });

  it('refuses a well-signed token whose claims have the wrong shape', async () => {
    const badRole = await new SignJWT({ role: 'root' }).setProtectedHeader({ alg: 'EdDSA' }).setSubject('a').setAudience('forge-fleet').setExpirationTime('1h').sign(createPrivateKey(keys.privateKeyPem));
    await expect(verifier.verify(badRole)).rejects.toMatchObject({ code: 'UNAUTHENTICATED', message: expect.stringMatching(/role/) as string });
  });

  describe('clock skew', () => {
    const signed = (times: { iat?: number; nbf?: number }) => {
      const now = Math.floor(Date.now() / 1000);
      const jwt = new SignJWT({}).setProtectedHeader({ alg: 'EdDSA' }).setSubject('a').setAudience('forge-fleet').setExpirationTime(now + 400 * 24 * 3600);
      if (times.iat !== undefined) jwt.setIssuedAt(now + times.iat);
      if (times.nbf !== undefined) jwt.setNotBefore(now + times.nbf);
      return jwt.sign(createPrivateKey(keys.privateKeyPem));
    };

    it('refuses a token issued (iat) or valid (nbf) beyond the allowed skew in the future, saying so', async () => {
      await expect(verifier.verify(await signed({ iat: 365 * 24 * 3600 }))).rejects.toMatchObject({ code: 'UNAUTHENTICATED', message: expect.stringMatching(/issued in the future.*60 s of clock skew/) as string });
      await expect(verifier.verify(await signed({ iat: 120 }))).rejects.toMatchObject({ code: 'UNAUTHENTICATED' });
      await expect(verifier.verify(await signed({ nbf: 3600 }))).rejects.toMatchObject({ code: 'UNAUTHENTICATED', message: expect.stringMatching(/not valid yet/) as string });
    });

    it('accepts iat and nbf within the skew, which is an option', async () => {
      await expect(verifier.verify(await signed({ iat: 30, nbf: 30 }))).resolves.toMatchObject({ sub: 'a' });
      const strict = new TokenVerifier(keys.publicKeyPem, { clockSkewSeconds: 0 });
      await expect(strict.verify(await signed({ iat: 30 }))).rejects.toMatchObject({ code: 'UNAUTHENTICATED' });
    });

    it('does not stretch exp by the skew', async () => {
      const expired = await mintToken(keys.privateKeyPem, { subject: 'a', expiresInSeconds: -10 });
      await expect(new TokenVerifier(keys.publicKeyPem).verify(expired)).rejects.toMatchObject({ message: expect.stringMatching(/expired/) as string });
    });
  });
});
