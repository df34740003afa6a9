import { ConfigInvalidError, keyCheck, type Tier } from '@forge-fleet/shared';
import type { KeyChecks } from '@forge-fleet/store';
import type { Logger } from 'pino';

/** What a worker's key is checked against. */
export interface LaneKeyCheckOptions {
  readonly lane: string;
  readonly tier: Tier;
  readonly pool: string | undefined;
  readonly workerId: string;
  /** The worker's FORGE_CALL_KEY. */
  readonly callKey: Uint8Array;
  readonly checks: KeyChecks;
  readonly log: Pick<Logger, 'warn'>;
}

/**
 * Proves a worker's FORGE_CALL_KEY is its lane's before it takes a call:
 * compares the key check the dispatchers publish for the lane with its own.
 * With none published yet (no dispatcher has run), the worker may start
 * unverified; it is checked again until it is verified.
 */
export class LaneKeyCheck {
  readonly #o: LaneKeyCheckOptions;
  #verified = false;

  constructor(options: LaneKeyCheckOptions) {
    this.#o = options;
  }

  /** Whether the published check has matched. */
  get verified(): boolean {
    return this.#verified;
  }

  /**
   * Compares the checks, waiting up to `waitMs` for one to be published
   * (asking the dispatchers for it). Resolves unverified when none is.
   * @throws ConfigInvalidError naming FORGE_CALL_KEY, and the command that makes the right key, when the key is not the lane's.
   */
  async verify(waitMs: number): Promise<void> {
    if (this.#verified) return;
    const o = this.#o;
    let published = await o.checks.read(o.lane);
    if (published === undefined && waitMs > 0) {
      await o.checks.request(o.lane, o.workerId);
      const until = Date.now() + waitMs;
      while (published === undefined && Date.now() < until) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        published = await o.checks.read(o.lane);
      }
      if (published === undefined) o.log.warn({ lane: o.lane }, "no dispatcher has published this lane's key check yet; FORGE_CALL_KEY is checked again before the first call runs");
    }
    if (published === undefined) return;
    if (published !== keyCheck(o.callKey)) {
      const pool = o.pool === undefined ? '' : ` --pool ${o.pool}`;
      throw new ConfigInvalidError('FORGE_CALL_KEY', [
        `it is not the key of the ${o.lane} queue (--tier ${o.tier}${pool}): the dispatchers sign this queue's calls with another key, so every call would be refused as forged`,
        `make the right one with \`forge keys worker-key --secret <the dispatchers' signing.secret> --tier ${o.tier}${pool}\`, or start the worker with the --tier/--pool its key was made for`,
      ]);
    }
    this.#verified = true;
  }
}
