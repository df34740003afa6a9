#!/usr/bin/env node
// Runs the built CLI (`npm run build`, done by `npm ci` through `prepare`). Imported by the package's own name so
// that under `--conditions=forge-source` (with tsx) this very file runs the TypeScript source: the integration
// tests run the real bin that way, never a stale build.
import '@forge-fleet/cli/main';
