#!/usr/bin/env node
// Runs the built CLI (`npm run build`, done by `npm ci` through `prepare`).
import '../dist/main.js';
