#!/usr/bin/env -S node --heap-growing-percent=100
// Runs the built dispatcher (`npm run build`, done by `npm ci` through `prepare`).
// Heap tuning, measured in bench/README.md: as for the worker, a full GC at twice the live set keeps the old
// generation from growing to four times what a busy dispatcher holds.
import '../dist/main.js';
