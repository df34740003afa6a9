import { deriveQueueKey, keyCheck } from '@forge-fleet/shared';
import { type KeyChecks, laneQueueName } from '@forge-fleet/store';
import type { Logger } from 'pino';

/**
 * Publishes, for every lane the catalog knows, the key check of the key its
 * calls are signed with, so a worker with a wrong FORGE_CALL_KEY refuses to
 * start. Checks are derived once per lane; the write is repeated after each
 * catalog read (one command), so a Redis that lost its data gets them back.
 */
export class KeyCheckPublisher {
  readonly #checks = new Map<string, string>();
  readonly #secret: Buffer;
  readonly #prefix: string;
  readonly #store: KeyChecks;
  readonly #log: Logger;

  constructor(secret: Buffer, prefix: string, store: KeyChecks, log: Logger) {
    this.#secret = secret;
    this.#prefix = prefix;
    this.#store = store;
    this.#log = log;
  }

  async publish(lanes: readonly string[]): Promise<void> {
    for (const lane of lanes) {
      if (!this.#checks.has(lane)) this.#checks.set(lane, keyCheck(deriveQueueKey(this.#secret, laneQueueName(this.#prefix, lane))));
    }
    try {
      await this.#store.publish(this.#checks);
    } catch (err) {
      this.#log.warn({ err }, 'could not publish the lanes\' key checks');
    }
  }
}
