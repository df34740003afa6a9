/** `forge`: the fleet's command line (keys and tokens today). */
import { isFleetError } from '@forge-fleet/shared';
import { runCli } from './cli.js';

runCli(process.argv.slice(2)).then(
  (out) => process.stdout.write(`${out}\n`),
  (error: unknown) => {
    process.stderr.write(`forge: ${isFleetError(error) ? `${error.code}: ${error.message}` : error instanceof Error ? error.message : String(error)}\n`);
    process.exitCode = 1;
  },
);
