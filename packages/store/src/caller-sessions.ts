import type { FleetKeys } from './keys.js';
import type { RedisConnection } from './redis.js';
import { CLAIM_CALLER_SESSION, luaScript, RELEASE_CALLER_SESSION } from './scripts.js';

/** Where a caller's session with a `perCaller` MCP server is held. */
export type SessionPlace =
  /** Here: this process holds it (or has just claimed it). */
  | { readonly here: true }
  /** Another worker, whose own queue takes the caller's calls. */
  | { readonly here: false; readonly queue: string }
  /** Nowhere, and not claimed (the caller asked not to). */
  | undefined;

/** The worker process a session belongs to, and the queue its calls reach it by. */
export interface SessionHolder {
  /** The worker process (every generation of its pool is the same holder: the sessions live in the process). */
  readonly process: string;
  /** Its current generation's own queue (see directPackOf). */
  readonly queue: string;
}

/**
 * Which worker holds each caller's session with each `perCaller` MCP server of
 * a lane, so that a caller's calls reach one instance however many workers
 * serve the server. A worker claims a caller's session before it starts an
 * instance for it, and renews what it holds under a lease (its catalog lease
 * period); a holder that dies stops renewing, and its callers are claimed
 * anew once the lease lapses. Workers only (their lane's part of the catalog).
 */
export class CallerSessions {
  readonly #keys: FleetKeys;
  readonly #claim;
  readonly #release;

  constructor(redis: RedisConnection, keys: FleetKeys) {
    this.#keys = keys;
    this.#claim = luaScript<string | null>(redis, 'forgeClaimCallerSession', 1, CLAIM_CALLER_SESSION);
    this.#release = luaScript<number>(redis, 'forgeReleaseCallerSession', 1, RELEASE_CALLER_SESSION);
  }

  /**
   * Where `caller`'s session with `server` is: another process's (its queue), or this one's — claimed now when no
   * one holds it and `claim` is set (else `undefined`). A session this process holds has its lease renewed, and
   * its queue set to `holder.queue` (a new generation's).
   */
  async place(lane: string, server: string, caller: string, holder: SessionHolder, leaseMs: number, claim: boolean): Promise<SessionPlace> {
    const held = await this.#claim([this.#keys.callerSession(lane, server, caller)], [`${holder.process}|${holder.queue}`, holder.process, leaseMs, claim ? 1 : 0]);
    if (held === null || held === undefined) return undefined;
    const bar = held.indexOf('|');
    if (bar >= 0 && held.slice(0, bar) === holder.process) return { here: true };
    return { here: false, queue: held.slice(bar + 1) };
  }

  /**
   * Renews this process's hold on each of `callers`' sessions with `server` (claiming those no one holds), and
   * returns the callers another process holds (a hold that lapsed and was claimed elsewhere meanwhile).
   */
  async renew(lane: string, server: string, callers: Iterable<string>, holder: SessionHolder, leaseMs: number): Promise<string[]> {
    const list = [...callers];
    const places = await Promise.all(list.map((caller) => this.place(lane, server, caller, holder, leaseMs, true)));
    return list.filter((_, i) => places[i]?.here === false);
  }

  /**
   * Gives up `holder`'s hold on each of `callers`' sessions with `server` (a worker that stops). A hold that a newer
   * generation of the same process took over (its queue is another) stays.
   */
  async release(lane: string, server: string, callers: Iterable<string>, holder: SessionHolder): Promise<void> {
    await Promise.all([...callers].map((caller) => this.#release([this.#keys.callerSession(lane, server, caller)], [`${holder.process}|${holder.queue}`])));
  }
}
