import type { RedisConnection } from './redis.js';

/** What an inbox item holds: its kind on the first line, the entry's JSON after it. */
export type AuditItemKind = 'audit' | 'risk';

/** Most items one RPUSH carries: keeps a single command (which blocks Redis) short. */
const MAX_ITEMS = 512;

/** The text of one inbox item; the audit keeper splits it at the first newline (see AuditArchivist). */
export function inboxItem(kind: AuditItemKind, json: string): string {
  return `${kind}\n${json}`;
}

/**
 * One writer's way into the audit stream: its inbox list. A writer's Redis
 * user may only RPUSH there (see scripts/redis-acl.mjs), and RPUSH has no way
 * to remove anything, so an entry, once written, stays for the audit keeper
 * to file. The items of one event-loop turn leave in one RPUSH: a busy
 * dispatcher or worker writes an entry per call, and one command for all of
 * them costs Redis and this process far less than one each. It is not a
 * script either: a script would have to declare the inbox, and Redis wants
 * read permission on every key a script declares.
 */
export class AuditInbox {
  #items: string[] = [];
  #waiters: Array<{ resolve: () => void; reject: (error: unknown) => void }> = [];

  constructor(
    private readonly redis: RedisConnection,
    private readonly key: string,
  ) {}

  push(kind: AuditItemKind, json: string): Promise<void> {
    if (this.#items.length === 0) setImmediate(() => this.#flush());
    this.#items.push(inboxItem(kind, json));
    const written = new Promise<void>((resolve, reject) => this.#waiters.push({ resolve, reject }));
    if (this.#items.length >= MAX_ITEMS) this.#flush();
    return written;
  }

  #flush(): void {
    const items = this.#items;
    const waiters = this.#waiters;
    if (items.length === 0) return; // already flushed (a full batch)
    this.#items = [];
    this.#waiters = [];
    this.redis.rpush(this.key, ...items).then(
      () => {
        for (const w of waiters) w.resolve();
      },
      (error: unknown) => {
        for (const w of waiters) w.reject(error);
      },
    );
  }
}
