#!/usr/bin/env -S node --max-semi-space-size=8 --heap-growing-percent=100
// Runs the built worker (`npm run build`, done by `npm ci` through `prepare`).
// Heap tuning, measured in bench/README.md: under load a worker's old generation fills with call objects that
// outlived two scavenges, and V8 lets it grow to about four times the live set (~20 MB) before a full GC, so
// peak RSS at 256 calls in flight reached ~185 MB. A full GC at twice the live set and 8 MB semi-spaces
// (V8's default: 16) keep it near 140 MB at no measured throughput cost. Launchers that run this file with
// `node <file>` read these flags from the line above.
import '../dist/main.js';
