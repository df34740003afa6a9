/**
 * The MCP server every MCP arm measures: `@modelcontextprotocol/server-everything`
 * (the reference servers' test server), over stdio, its default transport.
 * One place for how to start it and which of its tools each point calls, so
 * the direct, gateway and fleet arms run exactly the same server.
 */
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

const require = createRequire(import.meta.url);

/** The server's entry file: also how /proc scans recognise its processes (their command line holds it). */
export const EVERYTHING_ENTRY = join(dirname(require.resolve('@modelcontextprotocol/server-everything/package.json')), 'dist', 'index.js');

/** `node <entry> stdio`: stdio is its default, said anyway so a changed default cannot switch the arms to HTTP. */
export const EVERYTHING_COMMAND = Object.freeze({ command: process.execPath, args: Object.freeze([EVERYTHING_ENTRY, 'stdio']) });

/** A tool call of a point: which tool, with which arguments (a function of the call's number, so every call differs). */
export interface ToolCall {
  readonly tool: 'echo' | 'gzip-file-as-resource';
  readonly args: (n: number) => Record<string, unknown>;
}

/** The figures use `echo`: the server does next to nothing, so what is measured is the path to it. */
export const ECHO: ToolCall = Object.freeze({ tool: 'echo', args: (n: number) => ({ message: `bench ${n}` }) });

/**
 * The CPU-bound call of the scale point. server-everything has no tool that
 * computes for long; `gzip-file-as-resource` fetches a URL and gzips the body
 * synchronously, so with a large body served from this machine its time is
 * the server's CPU, not the network's. A fixed resource name: the server
 * replaces its session resource on each call instead of keeping one per call;
 * a resource link, so the result stays small.
 */
export function gzipCall(blobUrl: string): ToolCall {
  return Object.freeze({ tool: 'gzip-file-as-resource', args: () => ({ name: 'bench.gz', data: blobUrl, outputType: 'resourceLink' }) });
}
