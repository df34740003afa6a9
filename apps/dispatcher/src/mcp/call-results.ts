import { blocksOfResult, type CallView, errorResult, type FleetError, toWireError, type ToolResult } from '@forge-fleet/shared';
import { type CallToolResult, ErrorCode } from '@modelcontextprotocol/sdk/types.js';
import { McpProtocolError } from './protocol-error.js';
import { META } from './tool-listing.js';

/**
 * A fleet result as an MCP `CallToolResult`: its content blocks exactly as the
 * tool gave them (one text block for a text-only result), the structured
 * output, and the error flag.
 */
export function toCallToolResult(result: ToolResult, view?: CallView): CallToolResult {
  return {
    content: blocksOfResult(result),
    ...(result.structuredContent === undefined ? {} : { structuredContent: result.structuredContent }),
    isError: result.isError,
    _meta: {
      [META.callId]: result.toolCallId,
      ...(view === undefined ? {} : { [META.status]: view.status }),
      ...(result.error === undefined ? {} : { [META.error]: result.error }),
    },
  };
}

/**
 * Where a refusal goes. MCP separates protocol errors (the request itself is
 * wrong: JSON-RPC error) from tool errors (a result with `isError: true`, which
 * the model reads and can correct):
 *
 * - TOOL_NOT_FOUND, OUT_OF_SCOPE, REGISTRY_ERROR (a name served by none): the
 *   tool is not one this caller can call — JSON-RPC `-32602 Invalid params`, as
 *   the MCP spec does for unknown tools. (`-32601 Method not found` would say
 *   `tools/call` itself is missing.)
 * - FORBIDDEN (the token role may not call tools): `-32600 Invalid request`.
 * - INTERNAL: `-32603 Internal error`.
 * - Every other code (SCHEMA_VALIDATION, APPROVAL_DENIED, BAD_REQUEST and
 *   PAYLOAD_TOO_LARGE for the arguments, NO_WORKER, EXPIRED…): a tool error
 *   result, exactly as a call that failed on a worker.
 */
export function refusalOf(error: FleetError, call: { id: string; name: string }): CallToolResult {
  const data = { code: error.code, ...toWireError(error).details };
  switch (error.code) {
    case 'TOOL_NOT_FOUND':
    case 'OUT_OF_SCOPE':
    case 'REGISTRY_ERROR':
      throw new McpProtocolError(ErrorCode.InvalidParams, error.message, data);
    case 'FORBIDDEN':
    case 'UNAUTHENTICATED':
      throw new McpProtocolError(ErrorCode.InvalidRequest, error.message, data);
    case 'INTERNAL':
      throw new McpProtocolError(ErrorCode.InternalError, error.message, data);
    default:
      return toCallToolResult(errorResult(call, error));
  }
}
