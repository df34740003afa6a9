import { type CallEnvelope, deriveQueueKey, queueName, signEnvelope } from '@forge-fleet/shared';

/**
 * Signs every call the dispatcher enqueues, with the key of the queue it goes
 * to (derived from the fleet's signing secret; workers hold only their own
 * queue's key). The signature covers what a worker acts on — call id, tool,
 * arguments, tier, pool, reply target, deadline, approval decision, caller —
 * and holds for `validityMs` after enqueueing (or until the call's deadline,
 * if later), so a job replayed after that is refused.
 */
export class CallSigner {
  readonly #secret: Buffer;
  readonly #prefix: string;
  readonly #validityMs: number;
  readonly #keys = new Map<string, Buffer>();

  constructor(secret: Buffer, prefix: string, validityMs: number) {
    this.#secret = secret;
    this.#prefix = prefix;
    this.#validityMs = validityMs;
  }

  sign(envelope: CallEnvelope): CallEnvelope {
    const queue = queueName(this.#prefix, envelope.tier, envelope.tier === 'host' ? envelope.pool : undefined);
    let key = this.#keys.get(queue);
    if (key === undefined) this.#keys.set(queue, (key = deriveQueueKey(this.#secret, queue)));
    const validUntil = Math.max(envelope.enqueuedAt + this.#validityMs, envelope.deadline ?? 0);
    return signEnvelope(envelope, key, validUntil);
  }
}
