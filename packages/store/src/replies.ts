import { type CallProgress, ReplyMessage, type ResultReply } from '@forge-fleet/shared';
import { type FleetKeys } from './keys.js';
import type { RedisConnection } from './redis.js';

/**
 * How long an undrained reply list lives. A dispatcher drains its list
 * continuously; this only bounds what a crashed dispatcher leaves behind.
 */
export const REPLY_LIST_TTL_MS = 10 * 60 * 1000;

/**
 * Pushes a call's result to each waiting dispatcher's reply list: one LPUSH
 * per dispatcher. The cost does not grow with the number of dispatchers or
 * agents that are *not* waiting for this call. Commands go out on the
 * connection's auto-pipeline (one write per event-loop turn for all the
 * results finished in it).
 */
export class ReplyPublisher {
  /** When each reply list's expiry was last pushed forward (epoch ms). */
  readonly #expiresRenewed = new Map<string, number>();

  constructor(
    private readonly redis: RedisConnection,
    private readonly keys: FleetKeys,
  ) {}

  /** Pushes a message about a call of `lane` (its result, or progress) to each target dispatcher's reply list for that lane. */
  async publish(lane: string, targets: readonly string[], message: ReplyMessage): Promise<void> {
    const payload = JSON.stringify(message);
    const now = Date.now();
    const writes: Promise<unknown>[] = [];
    for (const target of new Set(targets)) {
      if (target === '') continue;
      const key = this.keys.replies(lane, target);
      writes.push(this.redis.lpush(key, payload));
      // The expiry only bounds what a crashed dispatcher leaves behind: renewing it once a second is plenty.
      if (now - (this.#expiresRenewed.get(key) ?? 0) > 1000) {
        this.#expiresRenewed.set(key, now);
        if (this.#expiresRenewed.size > 10_000) this.#expiresRenewed.clear();
        writes.push(this.redis.pexpire(key, REPLY_LIST_TTL_MS));
      }
    }
    await Promise.all(writes);
  }
}

/** One-off form of {@link ReplyPublisher.publish}, for rare paths (cancel, expiry). */
export async function publishReply(redis: RedisConnection, keys: FleetKeys, lane: string, targets: readonly string[], message: ReplyMessage): Promise<void> {
  await new ReplyPublisher(redis, keys).publish(lane, targets, message);
}

type Waiter = (message: ResultReply | undefined) => void;
type ProgressListener = (progress: CallProgress) => void;

/**
 * One dispatcher's inbox: a single loop drains its reply lists — one per lane
 * (tier or pool), all in one hash slot — with `BLMPOP … COUNT` on a dedicated
 * connection and hands each result to the requests waiting for that call.
 */
export class ReplyInbox {
  readonly #redis: RedisConnection;
  readonly #keys: FleetKeys;
  readonly #dispatcherId: string;
  /** The reply lists read, one per lane; read in turn so a busy lane cannot starve another. */
  #lists: string[] = [];
  #turn = 0;
  readonly #waiters = new Map<string, Set<Waiter>>();
  readonly #progress = new Map<string, Set<ProgressListener>>();
  /** Listeners of abort signals that calls wait on, one EventTarget listener per signal (see #onAbort). */
  readonly #abortListeners = new WeakMap<AbortSignal, Set<() => void>>();
  readonly #batch: number;
  #running = false;
  #released = false;
  #loop: Promise<void> | undefined;
  #onError: (error: unknown) => void;

  /**
   * @param redis a connection used for nothing else (it blocks).
   * @param batch replies taken per read. @defaultValue 512
   */
  constructor(redis: RedisConnection, keys: FleetKeys, dispatcherId: string, options: { batch?: number; lanes?: readonly string[]; onError?: (error: unknown) => void } = {}) {
    this.#redis = redis;
    this.#keys = keys;
    this.#dispatcherId = dispatcherId;
    this.lanes(options.lanes ?? []);
    this.#batch = options.batch ?? 512;
    this.#onError = options.onError ?? (() => {});
  }

  /**
   * Sets the lanes whose reply lists are read (the tiers, and each host pool
   * the catalog knows). A change takes effect at the next read, within the
   * one-second block: a reply pushed meanwhile waits in its list, never lost.
   */
  lanes(lanes: readonly string[]): void {
    this.#lists = [...new Set(lanes)].sort().map((lane) => this.#keys.replies(lane, this.#dispatcherId));
  }

  start(): void {
    if (this.#running) return;
    this.#running = true;
    this.#loop = this.#drain();
  }

  /** Stops the loop; waiting requests are not resolved (their own timeouts answer them). */
  async stop(): Promise<void> {
    this.#running = false;
    // Closing the connection interrupts the blocking read at once.
    this.#redis.disconnect();
    await this.#loop;
  }

  /**
   * Answers every waiting request now with `undefined` (as if its wait had
   * ended), and every later one at once: a dispatcher shutting down answers
   * what it holds with the call's current status instead of keeping it.
   */
  releaseAll(): void {
    this.#released = true;
    for (const set of [...this.#waiters.values()]) for (const waiter of [...set]) waiter(undefined);
  }

  /** Waits for the call's result, up to `timeoutMs`; resolves `undefined` on timeout, abort or {@link releaseAll}. */
  wait(callId: string, timeoutMs: number, signal?: AbortSignal): Promise<ResultReply | undefined> {
    return this.listen(callId, timeoutMs, signal).reply;
  }

  /**
   * Like {@link wait}, with a way to stop listening early (it resolves
   * `undefined`): a request listens before its call can possibly end, and
   * stops when the call turns out not to run after all.
   */
  listen(callId: string, timeoutMs: number, signal?: AbortSignal): { reply: Promise<ResultReply | undefined>; stop(): void } {
    if (this.#released || signal?.aborted === true) return { reply: Promise.resolve(undefined), stop: () => {} };
    let stop: () => void = () => {};
    const reply = new Promise<ResultReply | undefined>((resolve) => {
      let set = this.#waiters.get(callId);
      if (set === undefined) this.#waiters.set(callId, (set = new Set()));
      const done = (message: ResultReply | undefined): void => {
        clearTimeout(timer);
        unlisten?.();
        set.delete(waiter);
        if (set.size === 0 && this.#waiters.get(callId) === set) this.#waiters.delete(callId);
        resolve(message);
      };
      const waiter: Waiter = (message) => done(message);
      const onAbort = (): void => done(undefined);
      const timer = setTimeout(() => done(undefined), timeoutMs);
      set.add(waiter);
      const unlisten = signal === undefined ? undefined : this.#onAbort(signal, onAbort);
      stop = onAbort;
    });
    return { reply, stop };
  }

  /**
   * Runs `listener` when `signal` aborts; returns its removal. The calls of a
   * batch request all wait on the request's one signal: they share a single
   * EventTarget listener here instead of adding and removing one each.
   */
  #onAbort(signal: AbortSignal, listener: () => void): () => void {
    let listeners = this.#abortListeners.get(signal);
    if (listeners === undefined) {
      const set = (listeners = new Set());
      this.#abortListeners.set(signal, set);
      signal.addEventListener('abort', () => {
        for (const l of [...set]) l();
      }, { once: true });
    }
    const set = listeners;
    set.add(listener);
    return () => set.delete(listener);
  }

  /**
   * Hears the progress reports of a call this dispatcher waits for (it must
   * be waiting — as submitter or watcher — for workers to send them here).
   * Returns the unsubscription.
   */
  onProgress(callId: string, listener: ProgressListener): () => void {
    let set = this.#progress.get(callId);
    if (set === undefined) this.#progress.set(callId, (set = new Set()));
    set.add(listener);
    return () => {
      set.delete(listener);
      if (set.size === 0 && this.#progress.get(callId) === set) this.#progress.delete(callId);
    };
  }

  /** How many requests are waiting. */
  get waiting(): number {
    let n = 0;
    for (const set of this.#waiters.values()) n += set.size;
    return n;
  }

  async #drain(): Promise<void> {
    while (this.#running) {
      let reply: [string, string[]] | null;
      try {
        const lists = this.#lists;
        if (lists.length === 0) {
          await new Promise((r) => setTimeout(r, 100));
          continue;
        }
        // Start from another list each time: BLMPOP serves the first non-empty one.
        const first = this.#turn++ % lists.length;
        const order = [...lists.slice(first), ...lists.slice(0, first)];
        reply = (await this.#redis.blmpop(1, order.length, ...order, 'RIGHT', 'COUNT', this.#batch));
      } catch (error) {
        if (!this.#running) return;
        this.#onError(error);
        await new Promise((r) => setTimeout(r, 100));
        continue;
      }
      if (reply === null) continue;
      for (const raw of reply[1]) this.#deliver(raw);
      // The waiters write their answers in the microtasks that follow; the next BLMPOP goes after them, not ahead
      // (a lone call's answer waited for that write). Replies that come meanwhile wait in their list.
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
  }

  #deliver(raw: string): void {
    let message: ReplyMessage;
    try {
      message = ReplyMessage.parse(JSON.parse(raw));
    } catch (error) {
      this.#onError(error);
      return;
    }
    if (!('status' in message)) {
      const { progress } = message;
      for (const listener of [...(this.#progress.get(message.id) ?? [])]) listener(progress);
      return;
    }
    const set = this.#waiters.get(message.id);
    if (set === undefined) return; // nobody waits any more: the result is in the call record
    for (const waiter of [...set]) waiter(message);
  }
}
