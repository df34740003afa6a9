import { describe, expect, it } from 'vitest';
import { registrationOnlyDeps } from '../test/fixtures/registration-only-deps.js';
import { buildApp } from './app.js';

describe('buildApp', () => {
  it('starts without a warning on stderr (fastify deprecations are printed at every start)', async () => {
    const warnings: string[] = [];
    const onWarning = (warning: Error): void => void warnings.push(`${warning.name}: ${warning.message}`);
    process.on('warning', onWarning);
    try {
      const app = buildApp(registrationOnlyDeps());
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
