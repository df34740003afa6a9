/** `forge`: the fleet's command line (tools, calls, approvals, queues; keys and tokens). */
import { reportError, runCli } from './cli.js';
import { parseCliEnv } from './env.js';

try {
  process.exitCode = await runCli(process.argv.slice(2), { env: parseCliEnv(process.env), stdout: process.stdout, stderr: process.stderr });
} catch (error) {
  process.exitCode = reportError(error, process.stderr);
}
