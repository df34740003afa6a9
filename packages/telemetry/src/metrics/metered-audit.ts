import type { AuditEntry, AuditLogger } from '@forge-fleet/shared';
import type { FleetMetrics } from './fleet-metrics.js';

/**
 * An audit sink that also counts outcomes. Every decision a process makes
 * about a call already passes through its audit sink, so counting there keeps
 * metrics and audit from ever disagreeing, and no code path can record one
 * and forget the other.
 */
export class MeteredAuditLogger implements AuditLogger {
  constructor(
    private readonly inner: AuditLogger,
    private readonly metrics: FleetMetrics,
  ) {}

  record(entry: AuditEntry): void | Promise<void> {
    this.metrics.observeAudit(entry);
    return this.inner.record(entry);
  }
}
