import { type CallEnvelope, deriveQueueKey, queueName, signEnvelope } from '@forge-fleet/shared';

/**
 * Signs every call the dispatcher enqueues, with the key of the queue it goes
 * to (derived from the fleet's signing secret; workers hold only their own
 * queue's key). The signature covers what a worker acts on — call id, tool,
 * arguments, tier, pool, reply target, deadline, approval decision, caller —
 * and holds until the call's deadline, or for `validityMs` after enqueueing
 * when it has none: a call past its deadline never runs, so its envelope has
 * no use for longer. Within that time a replayed job is refused by the lane's
 * execution records (see Executions in packages/store).
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
    const validUntil = envelope.deadline ?? envelope.enqueuedAt + this.#validityMs;
    return signEnvelope(envelope, key, validUntil);
  }
}
