import { ExecutionFailedError } from '@forge-fleet/shared';

/**
 * The server instance running a call died (or was replaced) before the call
 * ended: whether the call took effect is unknown. `details.failure` is
 * `instance_lost`, so callers tell it from a tool's own failure.
 *
 * Carries EXECUTION_FAILED until the error table has a code of its own for it
 * (the table is the one place codes are declared).
 */
export class McpInstanceLostError extends ExecutionFailedError {
  constructor(
    toolName: string,
    readonly server: string,
    readonly pid: number,
    options: { stderrTail?: string; cause?: unknown } = {},
  ) {
    const tail = options.stderrTail === undefined || options.stderrTail === '' ? '' : `; its last stderr: ${options.stderrTail}`;
    super(
      toolName,
      `the instance (pid ${pid}) of MCP server '${server}' serving the call ended before the call did, so whether it took effect is unknown${tail}; check before calling it again`,
      { cause: options.cause, details: { failure: 'instance_lost', server, pid } },
    );
  }
}
