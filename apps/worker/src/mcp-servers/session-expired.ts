import { McpServerLostError } from '@forge-fleet/shared';

/** Marks a {@link SessionExpiredError}: recognised by this brand, not by `instanceof` alone. */
const NOT_RUN: unique symbol = Symbol.for('forge.mcpSessionExpired');

/**
 * A call whose `tools/call` a Streamable HTTP upstream answered with HTTP 404
 * to the session id it carried. The upstream ended the session (an idle
 * timeout, a restart of a stateful server) and, as MCP's transport says of
 * such an answer, did not process the request: the call did not run, and may
 * be sent on a new session (see McpToolExecutor). Its code is a lost
 * instance's, MCP_SERVER_LOST, since the session is gone; its message says
 * the call did not run.
 */
export class SessionExpiredError extends McpServerLostError {
  readonly [NOT_RUN] = true;

  /**
   * @param toolName the tool as the fleet's caller knows it
   * @param instance the session for people (`session 6f1c… at https://host/mcp`)
   */
  constructor(toolName: string, server: string, instance: string, options: { cause?: unknown } = {}) {
    super(toolName, server, instance, options);
    this.message =
      `the upstream of MCP server '${server}' answered the call of tool '${toolName}' with HTTP 404 to its session (${instance}): ` +
      'it ended that session (an idle timeout or a restart), so the call did not run; it can be sent again on a new session';
  }
}

/** Whether `err` is a {@link SessionExpiredError}: a call that did not run, which may be sent again on a new session. */
export function isSessionExpired(err: unknown): err is SessionExpiredError {
  return typeof err === 'object' && err !== null && NOT_RUN in err;
}
