import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { type AppDeps, buildApp } from './app.js';

/** Deps for an app that is only built and made ready: no route is served, so no service is touched. */
function buildOnlyDeps(): AppDeps {
  const given: Record<string, unknown> = { log: pino({ level: 'silent' }), bodyLimit: 1024, closing: () => false, doors: undefined };
  return new Proxy(given, { get: (target, key: string) => (key in target ? target[key] : {}) }) as unknown as AppDeps;
}

describe('buildApp', () => {
  it('starts without a warning on stderr (fastify deprecations are printed at every start)', async () => {
    const warnings: string[] = [];
    const onWarning = (warning: Error): void => void warnings.push(`${warning.name}: ${warning.message}`);
    process.on('warning', onWarning);
    try {
      const app = buildApp(buildOnlyDeps());
      await app.ready();
      await app.close();
      // Warnings are emitted on the next tick.
      await new Promise((resolve) => setImmediate(resolve));
    } finally {
      process.off('warning', onWarning);
    }
    expect(warnings).toEqual([]);
  });
});
