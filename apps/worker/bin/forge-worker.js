#!/usr/bin/env -S node --max-semi-space-size=8
// Runs the built worker (`npm run build`, done by `npm ci` through `prepare`).
// A young generation of 8 MB semi-spaces (V8's default is 16): under load a worker's short-lived call objects
// die young either way, and its peak RSS at 256 calls in flight falls by ~20 MB at no measured cost
// (bench/README.md). Launchers that run this file with `node <file>` read these flags from this line.
import '../dist/main.js';
