#!/usr/bin/env node
// Runs the built dispatcher (`npm run build`, done by `npm ci` through `prepare`).
import '../dist/main.js';
