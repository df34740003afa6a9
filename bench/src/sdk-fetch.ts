import type { FetchLike } from '@modelcontextprotocol/sdk/shared/transport.js';

/**
 * The fetch an SDK `StreamableHTTPClientTransport` of a benchmark agent uses.
 * The transport passes one AbortSignal (its own, aborted by `close()`) to
 * every request, and fetch lets go of its listener on that signal only when
 * the response is collected: with hundreds of calls in flight the listeners
 * pass fetch's limit of 1,500 and Node warns on every further request — an
 * Error with a stack trace and a line on stderr per call, which the benchmark
 * would measure instead of the entrance (~0.2 ms per call here, a fifth of the
 * SDK client's CPU). The signal is left out: an agent exits right after
 * `close()`, so nothing needs aborting. Every SDK-client arm over HTTP (the
 * gateways' and the fleet's `/mcp`) uses this, so they are measured alike.
 */
export function sdkFetch(base: FetchLike = fetch): FetchLike {
  return (url, init) => {
    if (init?.signal === undefined || init.signal === null) return base(url, init);
    const { signal: _closeSignal, ...rest } = init;
    return base(url, rest);
  };
}
