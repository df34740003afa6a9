/**
 * A JSON-RPC error `/mcp` answers with, thrown from a request handler. The
 * SDK's protocol layer (and `internalErrorOf` on the direct path) sends a
 * thrown error's `code`, `message` and `data` as they are. The SDK's own
 * `McpError` writes `MCP error <code>: ` into its message, and a client's
 * `McpError` adds that prefix again when it reads the answer, so a caller saw
 * it twice. This class sends the fleet's message alone, the same words
 * `POST /v1/calls` gives for the same refusal.
 */
export class McpProtocolError extends Error {
  override readonly name = 'McpProtocolError';

  /**
   * @param code the JSON-RPC error code (`ErrorCode` of the SDK)
   * @param message what is wrong and what to change, as the wire carries it
   * @param data the error's `data` member, when it has one
   */
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
  }
}
