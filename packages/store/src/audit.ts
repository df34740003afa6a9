import type { AuditEntry, AuditLogger, FleetKeys, RiskSignal, RiskSignalQueue } from '@forge-fleet/shared';
import type { Redis } from 'ioredis';

/** Entries kept in each stream (approximately: trimmed with `~`). */
const MAX_ENTRIES = 10_000;

/**
 * Audit entries as a capped Redis stream, readable by any tool that speaks
 * Redis (`XRANGE <prefix>:{<prefix>.audit} - +`).
 */
export class RedisAuditLogger implements AuditLogger {
  constructor(
    private readonly redis: Redis,
    private readonly keys: FleetKeys,
  ) {}

  async record(entry: AuditEntry): Promise<void> {
    await this.redis.xadd(this.keys.audit, 'MAXLEN', '~', MAX_ENTRIES, '*', 'kind', 'audit', 'entry', JSON.stringify(entry));
  }
}

/** Risk signals go to the same stream as audit entries, marked as such; writing never blocks the call path. */
export class RedisRiskSignalQueue implements RiskSignalQueue {
  constructor(
    private readonly redis: Redis,
    private readonly keys: FleetKeys,
    private readonly onError: (error: unknown) => void = () => {},
  ) {}

  push(signal: RiskSignal): void {
    this.redis.xadd(this.keys.audit, 'MAXLEN', '~', MAX_ENTRIES, '*', 'kind', 'risk', 'entry', JSON.stringify(signal)).catch(this.onError);
  }
}
