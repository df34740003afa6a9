/**
 * @module @forge-fleet/cli
 *
 * The `forge` command line: key generation, worker keys and agent tokens.
 */
export { runCli, USAGE } from './cli.js';
export { initKeys, workerKey, KEY_FILES } from './commands/keys.js';
export { mint } from './commands/token.js';
