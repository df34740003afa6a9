/**
 * `npx tsx --conditions=forge-source bench/src/signing.ts`: what signing a
 * call costs, HMAC-SHA256 (the fleet's choice) against Ed25519, for the same
 * canonical text: µs per sign and per verify on this machine.
 */
import { createHmac, generateKeyPairSync, randomBytes, sign, verify } from 'node:crypto';
import { type CallEnvelope, deriveQueueKey, envelopeForgery, signEnvelope } from '@forge-fleet/shared';

const N = Number(process.env.N ?? 20_000);
// Figures measured on the development machine are in docs/security.md.
const envelope: CallEnvelope = {
  v: 1,
  call: { id: '5f0b5c1e-4a3e-4a43-9d0c-2f1a1e4b7c11', name: 'http_get', arguments: { url: 'https://example.com/some/path?q=1' } },
  tier: 'host',
  replyTo: 'd-host-1234-abcdef',
  enqueuedAt: Date.now(),
  caller: 'agent-42',
  token: 'a0b1c2d3-e4f5-4a6b-8c9d-0e1f2a3b4c5d',
  approval: { decision: 'approved' },
};
const text = Buffer.from(`hmac-sha256/queue-v1\n${JSON.stringify(envelope)}`);

function time(label: string, run: () => void): number {
  for (let i = 0; i < 1000; i++) run();
  const began = process.hrtime.bigint();
  for (let i = 0; i < N; i++) run();
  const us = Number(process.hrtime.bigint() - began) / 1000 / N;
  process.stdout.write(`${label.padEnd(54)} ${us.toFixed(2).padStart(8)} µs\n`);
  return us;
}

const key = deriveQueueKey(randomBytes(32), '{forge.host}');
const { privateKey, publicKey } = generateKeyPairSync('ed25519');
const signature = sign(null, text, privateKey);
const signed = signEnvelope(envelope, key, Date.now() + 60_000);

time('HMAC-SHA256 over the canonical text', () => createHmac('sha256', key).update(text).digest());
time('Ed25519 sign of the same text', () => sign(null, text, privateKey));
time('Ed25519 verify of the same text', () => verify(null, text, publicKey, signature));
time('signEnvelope (hash args + canonical text + HMAC)', () => signEnvelope(envelope, key, Date.now() + 60_000));
time('envelopeForgery (verification as the worker runs it)', () => envelopeForgery(signed, key, { tier: 'host' }));
