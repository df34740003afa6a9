import type { RequestId } from '@modelcontextprotocol/sdk/types.js';

/**
 * What the worker's fetch reads of a POST the SDK's Streamable HTTP transport
 * sends: one JSON-RPC message or a batch of them, as a string. Read to learn
 * which requests an answer must settle (bounded-fetch.ts), which POSTs a
 * cancel ends (request-posts.ts), and which calls an expired session did not
 * run (session-transport.ts).
 */

/** The JSON-RPC messages of a POST's body; none for a body that is not a JSON string. */
function messagesOf(body: unknown): readonly { readonly id?: unknown; readonly method?: unknown; readonly params?: { readonly requestId?: unknown } }[] {
  if (typeof body !== 'string') return [];
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return [];
  }
  return (Array.isArray(parsed) ? parsed : [parsed]).filter((m): m is object => typeof m === 'object' && m !== null);
}

const isId = (id: unknown): id is RequestId => typeof id === 'string' || typeof id === 'number';

/** The ids of the requests in a POST's body: all of them, or only those of `method`. */
export function requestIdsOf(body: unknown, method?: string): RequestId[] {
  return messagesOf(body)
    .filter((m) => typeof m.method === 'string' && (method === undefined || m.method === method) && isId(m.id))
    .map((m) => m.id as RequestId);
}

/** The ids of the requests a POST's body cancels (`notifications/cancelled`). */
export function cancelledIdsOf(body: unknown): RequestId[] {
  // Most bodies are no cancel: they are not parsed again for it.
  if (typeof body !== 'string' || !body.includes('notifications/cancelled')) return [];
  return messagesOf(body)
    .filter((m) => m.method === 'notifications/cancelled' && isId(m.params?.requestId))
    .map((m) => m.params!.requestId as RequestId);
}
