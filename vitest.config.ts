import { defineConfig } from 'vitest/config';

// Workspace packages resolve to their TypeScript sources through the
// `forge-source` export condition, so tests never run stale builds.
// No bundlers' `module` condition: dependencies load as Node loads them in production (@opentelemetry/api's
// `module` build has extensionless imports that Node cannot load).
const conditions = ['forge-source', 'import', 'node', 'default'];

export default defineConfig({
  resolve: { conditions },
  ssr: { resolve: { conditions, externalConditions: conditions } },
  // Global setup files run in vitest's own `__vitest__` environment.
  environments: { __vitest__: { resolve: { conditions } } },
  test: {
    // Unexpected console output fails a test (see test/setup/console.ts).
    setupFiles: ['./test/setup/console.ts'],
    projects: [
      {
        extends: true,
        test: {
          name: 'unit',
          include: ['packages/*/src/**/*.test.ts', 'apps/*/src/**/*.test.ts'],
        },
      },
      {
        extends: true,
        test: {
          name: 'integration',
          include: ['test/integration/**/*.int.test.ts', 'apps/*/test/**/*.int.test.ts', 'packages/*/test/**/*.int.test.ts'],
          globalSetup: ['./test/setup/redis.global.ts'],
          testTimeout: 30_000,
          hookTimeout: 60_000,
        },
      },
      {
        extends: true,
        test: {
          name: 'e2e',
          include: ['test/e2e/**/*.e2e.test.ts'],
          globalSetup: ['./test/setup/redis.global.ts'],
          testTimeout: 120_000,
          hookTimeout: 120_000,
        },
      },
    ],
  },
});
