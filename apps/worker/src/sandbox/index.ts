/**
 * @module sandbox
 *
 * Runs Platform- and Embedded-tier tool handlers away from the worker that
 * holds the Redis connection: warm child processes in their own user, network
 * and PID namespaces, under Node's permission model and rlimits, with an empty
 * environment. See docs/sandbox.md for what each layer does and does not stop.
 */
export { startSandbox, type Sandbox, type SandboxIsolation, type SandboxOptions } from './sandbox.js';
export { DEFAULT_LIMITS, type SandboxLimits } from './launch.js';
export { unenforced } from './strict.js';
export { closeInheritedDescriptors } from './inherited-descriptors.js';
