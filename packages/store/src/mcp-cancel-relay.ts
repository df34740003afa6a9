import { z } from 'zod';
import type { FleetKeys } from './keys.js';
import type { RedisConnection } from './redis.js';

/**
 * An MCP `notifications/cancelled` that this dispatcher could not match. In
 * stateless Streamable HTTP each POST may reach any dispatcher behind the load
 * balancer, so the cancellation of a `tools/call` often lands on another
 * process than the one holding the call's request. Versioned: dispatchers of
 * two releases share the channel during a rolling update.
 */
export const McpCancel = z.object({
  v: z.literal(1),
  /** InFlightCalls.clientOf: who sent it (a hash, never the token). */
  client: z.string().min(1).max(128),
  requestId: z.union([z.string().max(256), z.number()]),
  reason: z.string().max(1000).optional(),
  /** The dispatcher that relayed it (it does not hear its own). */
  from: z.string(),
});
export type McpCancel = z.infer<typeof McpCancel>;

/**
 * The relay over Redis pub/sub (`<prefix>:mcp-cancel`, dispatchers only in the ACL): cancellations are rare, and one that finds no
 * listener (its call already answered) has nothing left to cancel, so
 * fire-and-forget delivery is enough.
 */
export class McpCancelRelay {
  constructor(
    private readonly redis: RedisConnection,
    private readonly subscriber: RedisConnection,
    private readonly keys: FleetKeys,
    private readonly dispatcherId: string,
    private readonly log: { warn(fields: object, message: string): void },
  ) {}

  publish(cancel: Omit<McpCancel, 'v' | 'from'>): void {
    const message: McpCancel = { v: 1, ...cancel, from: this.dispatcherId };
    this.redis.publish(this.keys.mcpCancelChannel, JSON.stringify(message)).catch((err: unknown) => this.log.warn({ err }, 'could not relay an MCP cancellation'));
  }

  async subscribe(onCancel: (cancel: McpCancel) => void): Promise<void> {
    this.subscriber.on('message', (channel: string, raw: string) => {
      if (channel !== this.keys.mcpCancelChannel) return;
      let cancel: McpCancel;
      try {
        cancel = McpCancel.parse(JSON.parse(raw));
      } catch (err) {
        this.log.warn({ err }, 'ignored a malformed MCP cancellation on the bus');
        return;
      }
      if (cancel.from !== this.dispatcherId) onCancel(cancel);
    });
    await this.subscriber.subscribe(this.keys.mcpCancelChannel);
  }
}
