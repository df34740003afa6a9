/**
 * @module @forge-fleet/cli
 *
 * The `forge` command line: the live tool catalog, calls, approvals and queue
 * statistics of a running fleet (through `@forge-fleet/client`), and key and
 * token generation.
 */
export { runCli, reportError, USAGE } from './cli.js';
export { ExitCode, type CliContext } from './context.js';
export { CliEnv, parseCliEnv } from './env.js';
export { UsageError } from './args.js';
export { initKeys, workerKey, KEY_FILES } from './commands/keys.js';
export { mint } from './commands/token.js';
