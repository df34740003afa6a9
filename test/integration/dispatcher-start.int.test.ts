import { createServer, type Server } from 'node:net';
import { freePort } from '@forge-fleet/local-redis';
import { afterAll, describe, expect, it } from 'vitest';
import { TestFleet } from '../fixtures/fleet.js';

/** What a dispatcher that refused to start printed (TestFleet.dispatcher rejects with it). */
async function refusal(start: Promise<unknown>): Promise<string> {
  try {
    await start;
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
  throw new Error('the dispatcher started');
}

/**
 * A dispatcher that cannot start says why in one line (`forge-dispatcher:
 * CONFIG_INVALID: …` naming the setting), never with a stack trace or a raw
 * ZodError: what `npm start` and an operator read first.
 */
describe('a dispatcher that cannot start', () => {
  const fleet = new TestFleet();
  afterAll(() => fleet.stopAll());

  it('names the port it found taken', async () => {
    const port = await freePort();
    const squatter: Server = createServer((socket) => socket.destroy());
    await new Promise<void>((resolve) => squatter.listen(port, '127.0.0.1', resolve));
    try {
      const said = await refusal(fleet.dispatcher({ PORT: String(port) }));
      expect(said).toContain(`forge-dispatcher: CONFIG_INVALID: invalid dispatcher environment: PORT: 127.0.0.1:${port} is in use (another process listens there); set PORT to a free port, or stop that process\n`);
      expect(said).not.toContain('EADDRINUSE');
      expect(said).not.toMatch(/^\s+at /m);
    } finally {
      await new Promise<void>((resolve) => squatter.close(() => resolve()));
    }
  });

  it('names the JSON setting that is wrong and where, instead of dumping a ZodError', async () => {
    const said = await refusal(fleet.dispatcher({ FORGE_SCOPES: '{"research":["search.*","bar_*"]}' }));
    expect(said).toContain('forge-dispatcher: CONFIG_INVALID: invalid dispatcher environment: FORGE_SCOPES.research.1: tool pattern "bar_*" is not an exact tool name, "prefix.*" or "*"; it takes a JSON object');
    expect(said).not.toContain('ZodError');
    expect(said).not.toMatch(/^\s+at /m);
    expect(await refusal(fleet.dispatcher({ FORGE_DEFAULT_SCOPE: 'search.*' }))).toMatch(/forge-dispatcher: CONFIG_INVALID: invalid dispatcher environment: FORGE_DEFAULT_SCOPE: is not valid JSON \(.+\); it takes a JSON array of tool patterns/);
  });
});
