import { inspect } from 'node:util';
import { describe, expect, it } from 'vitest';
import { MAX_MESSAGE_BYTES } from './answer-lines.js';
import { isHttpLaunch, resolveMcpServerPoolOptions } from './pool-options.js';
import { SecretValue } from './secret-value.js';

/** The problems a ConfigInvalidError lists for `options`. */
function problemsOf(options: Parameters<typeof resolveMcpServerPoolOptions>[0]): unknown {
  try {
    resolveMcpServerPoolOptions(options);
  } catch (err) {
    return (err as { details?: { problems?: unknown } }).details?.problems;
  }
  throw new Error('the options were accepted');
}

describe('the launch of a pool', () => {
  it('is stdio for `command` and HTTP for `url`, with the defaults of each', () => {
    const stdio = resolveMcpServerPoolOptions({ server: 's', launch: { command: 'node' } }).launch;
    const http = resolveMcpServerPoolOptions({ server: 'h', launch: { url: 'https://mcp.example.com/mcp' } }).launch;
    expect(isHttpLaunch(stdio)).toBe(false);
    expect(stdio).toMatchObject({ command: 'node', args: [], env: {} });
    expect(isHttpLaunch(http)).toBe(true);
    expect(http).toEqual({ url: 'https://mcp.example.com/mcp', headers: {}, startupTimeoutMs: 30_000, maxMessageBytes: MAX_MESSAGE_BYTES });
  });

  it('keeps a secret header a SecretValue, which shows only where it came from', () => {
    const token = new SecretValue('Bearer abcdefgh12345678', 'file /run/secrets/token');
    const options = resolveMcpServerPoolOptions({ server: 'h', launch: { url: 'https://mcp.example.com/mcp', headers: { Authorization: token } } });
    expect(isHttpLaunch(options.launch) && options.launch.headers.Authorization).toBe(token);
    expect(inspect(options, { depth: 10 })).not.toContain('abcdefgh12345678');
    expect(JSON.stringify(options)).toContain('[secret from file /run/secrets/token]');
  });

  it('names the problems of the kind of launch that was meant, and refuses a mix of both', () => {
    expect(problemsOf({ server: 'h', launch: { url: 'ftp://example.com/mcp' } })).toEqual([expect.stringMatching(/^launch\.url: /)]);
    expect(problemsOf({ server: 's', launch: { command: '' } })).toEqual([expect.stringMatching(/^launch\.command: /)]);
    expect(problemsOf({ server: 'x', launch: { command: 'node', url: 'https://mcp.example.com/mcp' } })).toEqual(['launch: a server is reached by `command` (stdio) or `url` (Streamable HTTP), not both']);
  });
});
