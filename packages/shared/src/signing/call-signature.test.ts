import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { CallEnvelope } from '../wire/envelope.js';
import { deriveQueueKey, envelopeForgery, signEnvelope } from './call-signature.js';

const secret = randomBytes(32);
const hostKey = deriveQueueKey(secret, '{forge.host}');
const platformKey = deriveQueueKey(secret, '{forge.platform}');
const envelope: CallEnvelope = {
  v: 1,
  call: { id: 'c1', name: 'pay', arguments: { amount: 10, to: 'acct-1' } },
  tier: 'host',
  replyTo: 'd1',
  enqueuedAt: 1_000,
  caller: 'agent-7',
  approval: { decision: 'approved' },
};
const host = { tier: 'host' };
const now = 5_000;

describe('call signatures', () => {
  it('derives a distinct key per queue, and refuses a short secret', () => {
    expect(hostKey.equals(platformKey)).toBe(false);
    expect(deriveQueueKey(secret, '{forge.host}').equals(hostKey)).toBe(true);
    expect(() => deriveQueueKey(randomBytes(16), '{forge.host}')).toThrow(/at least 32 bytes/);
  });

  it('accepts a call signed for this queue, whatever the key order of its arguments', () => {
    const signed = signEnvelope(envelope, hostKey, now + 1000);
    expect(envelopeForgery(signed, hostKey, host, now)).toBeUndefined();
    const reordered = { ...signed, call: { ...signed.call, arguments: { to: 'acct-1', amount: 10 } } };
    expect(envelopeForgery(reordered, hostKey, host, now)).toBeUndefined();
  });

  it('refuses an unsigned call', () => {
    expect(envelopeForgery(envelope, hostKey, host, now)).toMatch(/no dispatcher signature/);
  });

  it('refuses any altered field the worker acts on', () => {
    const signed = signEnvelope(envelope, hostKey, now + 1000);
    const alterations: CallEnvelope[] = [
      { ...signed, call: { ...signed.call, arguments: { amount: 10_000, to: 'acct-1' } } },
      { ...signed, call: { ...signed.call, name: 'refund' } },
      { ...signed, call: { ...signed.call, id: 'c2' } },
      { ...signed, caller: 'agent-8' },
      { ...signed, replyTo: 'd2' },
      { ...signed, deadline: now + 10_000 },
      { ...signed, approval: { decision: 'modified' } },
      { ...signed, sig: { ...signed.sig!, validUntil: now + 1_000_000 } },
    ];
    for (const altered of alterations) expect(envelopeForgery(altered, hostKey, host, now)).toMatch(/does not match/);
  });

  it('refuses a call moved onto another queue, or signed with another queue\'s key', () => {
    const forPlatform = signEnvelope({ ...envelope, tier: 'platform' }, platformKey, now + 1000);
    expect(envelopeForgery(forPlatform, hostKey, host, now)).toMatch(/signed for the platform queue/);
    const relabelled = { ...forPlatform, tier: 'host' as const };
    expect(envelopeForgery(relabelled, hostKey, host, now)).toMatch(/does not match/);
    const pooled = signEnvelope({ ...envelope, pool: 'payments' }, hostKey, now + 1000);
    expect(envelopeForgery(pooled, hostKey, host, now)).toMatch(/signed for the host\/payments queue/);
  });

  it('refuses a replay after the signature expired', () => {
    const signed = signEnvelope(envelope, hostKey, now - 1);
    expect(envelopeForgery(signed, hostKey, host, now)).toMatch(/expired/);
  });
});
