import type { McpCancel } from '@forge-fleet/store';

/** Carries unmatched MCP cancellations to every dispatcher (over Redis: McpCancelRelay in packages/store). */
export interface McpCancelBus {
  /** Sends a cancellation to the other dispatchers. */
  publish(cancel: Omit<McpCancel, 'v' | 'from'>): void;
  /** Hears the cancellations the other dispatchers relay. */
  subscribe(onCancel: (cancel: McpCancel) => void): Promise<void>;
}
