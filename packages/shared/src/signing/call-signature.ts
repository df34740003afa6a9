import { createHmac, hash, hkdfSync, timingSafeEqual } from 'node:crypto';
import type { CallEnvelope, CallSignature } from '../wire/envelope.js';
import { stableStringify } from '../wire/stable-json.js';

/**
 * Calls are signed with HMAC-SHA256 under a key per queue, derived from the
 * dispatchers' signing secret. A worker holds only its own queue's key, so
 * the worst a compromised worker can forge is a call for the queue it already
 * serves. Ed25519 would let every worker share one public key, but costs two
 * orders of magnitude more CPU per call (see docs/security.md for the
 * figures measured here).
 */
export const SIGNATURE_ALGORITHM = 'hmac-sha256/queue-v1';

/** The bytes a signing secret or derived key must at least have. */
export const MIN_KEY_BYTES = 32;

/**
 * The key that signs (dispatcher) and verifies (worker) the calls of one
 * queue: HKDF-SHA256 of the fleet's signing secret with the queue's name.
 */
export function deriveQueueKey(secret: Uint8Array, queue: string): Buffer {
  if (secret.byteLength < MIN_KEY_BYTES) throw new RangeError(`the signing secret must have at least ${MIN_KEY_BYTES} bytes, got ${secret.byteLength}`);
  return Buffer.from(hkdfSync('sha256', secret, 'forge-fleet call signing v1', queue, 32));
}

/** What a signature covers, in one canonical text: everything a worker acts on. */
function signedText(e: CallEnvelope, validUntil: number): string {
  // One-shot: no Hash object per call (this runs twice per call, on the dispatcher and the worker).
  const argumentsHash = hash('sha256', stableStringify(e.call.arguments), 'base64url');
  return [
    SIGNATURE_ALGORITHM,
    e.call.id,
    e.call.name,
    argumentsHash,
    e.tier,
    e.pool ?? '',
    e.replyTo,
    e.deadline ?? '',
    validUntil,
    e.approval?.decision ?? '',
    e.approval?.by ?? '',
    e.caller ?? '',
    e.token ?? '',
  ].join('\n');
}

/** Signs an envelope for the queue whose key is given; the signature is valid until `validUntil` (epoch ms). */
export function signEnvelope(envelope: CallEnvelope, key: Uint8Array, validUntil: number): CallEnvelope {
  const { sig: _ignored, ...unsigned } = envelope;
  const mac = createHmac('sha256', key).update(signedText(unsigned, validUntil)).digest('base64url');
  const sig: CallSignature = { alg: SIGNATURE_ALGORITHM, validUntil, mac };
  return { ...unsigned, sig };
}

/** Why a worker must not run a call, or `undefined` when its signature holds. */
export function envelopeForgery(envelope: CallEnvelope, key: Uint8Array, queue: { tier: string; pool?: string | undefined }, now = Date.now()): string | undefined {
  const { sig } = envelope;
  if (sig === undefined) return 'it carries no dispatcher signature';
  if (sig.alg !== SIGNATURE_ALGORITHM) return `its signature uses '${sig.alg}', not '${SIGNATURE_ALGORITHM}'`;
  if (envelope.tier !== queue.tier || (envelope.pool ?? '') !== (queue.pool ?? '')) {
    return `it was signed for the ${envelope.tier}${envelope.pool === undefined ? '' : `/${envelope.pool}`} queue, not this one`;
  }
  const expected = createHmac('sha256', key).update(signedText(envelope, sig.validUntil)).digest();
  const presented = Buffer.from(sig.mac, 'base64url');
  // Constant time: how much of a MAC matched must not show in the timing.
  if (presented.length !== expected.length || !timingSafeEqual(presented, expected)) return 'its signature does not match its contents (altered, or signed with another key)';
  if (now > sig.validUntil) return `its signature expired at ${new Date(sig.validUntil).toISOString()} (a replayed job)`;
  return undefined;
}

/**
 * A value that shows which key a queue's calls are signed with, without
 * revealing it: dispatchers publish it per lane, and a worker compares it
 * with its own FORGE_CALL_KEY's at start, so a worker holding the wrong key
 * (or started for another tier or pool) refuses to start instead of failing
 * every call it takes as forged.
 */
export function keyCheck(key: Uint8Array): string {
  return createHmac('sha256', key).update('forge-fleet key check v1').digest('base64url');
}
