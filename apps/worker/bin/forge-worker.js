#!/usr/bin/env node
// Runs the built worker (`npm run build`, done by `npm ci` through `prepare`).
import '../dist/main.js';
