import { DEFAULT_FLEET_PREFIX, isFleetError, Role, TierInput } from '@forge-fleet/shared';
import { callIdArgument, jsonObjectArgument, type OptionSpec, type ParsedArgs, parseCommandArgs, requiredOption, secondsOption, stringOption, toolPatternsOption, UsageError } from './args.js';
import { runApprovals, runDecide } from './commands/approvals.js';
import { runCall } from './commands/call.js';
import { initKeys, KEY_FILES, workerKey } from './commands/keys.js';
import { runQueues } from './commands/queues.js';
import { mint } from './commands/token.js';
import { runTools } from './commands/tools.js';
import { type CliContext, ExitCode } from './context.js';
import { DEFAULT_URL, type FleetApi, openFleetClient, resolveEndpoint, UnreachableError, withFleet } from './endpoint.js';
import { printable } from './output.js';

/** One `forge` command: its words, usage, options and how it runs. */
interface Command {
  /** The words that name it: `tools`, `approvals approve`, `keys init`. */
  readonly name: string;
  readonly usage: string;
  /** Talks to a dispatcher (takes --url, --token, --json). */
  readonly fleet: boolean;
  readonly options: OptionSpec;
  /** Fewest and most positional arguments after its name. */
  readonly arity: readonly [number, number];
  run(args: ParsedArgs, ctx: CliContext, usage: string): Promise<ExitCode>;
}

/** Options every fleet command takes (see {@link fleetCommand}). */
const FLEET_OPTIONS: OptionSpec = { url: { type: 'string' }, token: { type: 'string' }, json: { type: 'boolean' } };

const FLEET_OPTIONS_USAGE = `  options of tools, call, approvals and queues:
      --url URL      the dispatcher (default: $FORGE_URL, else the URL \`npm start\` wrote to .forge/dev.json, else ${DEFAULT_URL})
      --token TOKEN  bearer token (default: $FORGE_TOKEN, else the dev token in .forge/dev.json when talking to its URL)
      --json         print the API's JSON answer instead of a table`;

/** A command that talks to a dispatcher: it gets --url, --token and --json, and a client it need not close. */
function fleetCommand(
  name: string,
  usage: string,
  options: OptionSpec,
  arity: readonly [number, number],
  run: (api: FleetApi, args: ParsedArgs, json: boolean, ctx: CliContext, usage: string) => Promise<ExitCode>,
): Command {
  return {
    name,
    usage,
    fleet: true,
    options: { ...options, ...FLEET_OPTIONS },
    arity,
    run: (args, ctx, fullUsage) => {
      const endpoint = resolveEndpoint({ url: stringOption(args, 'url'), token: stringOption(args, 'token') }, ctx.env, `forge ${name}`, fullUsage);
      return withFleet(endpoint, ctx.openFleet ?? openFleetClient, (api) => run(api, args, args.values['json'] === true, ctx, fullUsage));
    },
  };
}

/** A command that only prints a line of text (keys and tokens). */
function printing(ctx: CliContext, text: string): ExitCode {
  ctx.stdout.write(`${text}\n`);
  return ExitCode.OK;
}

const COMMANDS: readonly Command[] = [
  fleetCommand('tools', `  forge tools\n      the live tool catalog: name, tier, pool, flags, description`, {}, [0, 0], (api, _args, json, ctx) => runTools(api, json, ctx)),
  fleetCommand(
    'call',
    `  forge call TOOL ['JSON'] [--wait] [--id ID] [--timeout SECONDS]
      submits a call with JSON object arguments (default {}) and prints its id and status; with --wait, waits
      for the end (a status line on stderr) and prints the result: its structured content, else its text.
      --timeout stops waiting (the call goes on). Exit 0 completed, 1 refused, failed or cancelled`,
    { wait: { type: 'boolean' }, id: { type: 'string' }, timeout: { type: 'string' } },
    [1, 2],
    (api, args, json, ctx, usage) => {
      const [tool, text] = args.positionals as [string, string | undefined];
      const id = stringOption(args, 'id');
      const wait = args.values['wait'] === true;
      const timeoutMs = secondsOption(args, 'timeout', 'forge call', usage);
      if (timeoutMs !== undefined && !wait) throw new UsageError('forge call', '--timeout bounds --wait; pass both', usage);
      return runCall(
        api,
        {
          tool,
          args: text === undefined ? {} : jsonObjectArgument(text, 'arguments', 'forge call', usage),
          id: id === undefined ? undefined : callIdArgument(id, 'forge call', usage),
          wait,
          timeoutMs,
          json,
        },
        ctx,
      );
    },
  ),
  fleetCommand(
    'approvals',
    `  forge approvals
      calls waiting for a person (approver or admin token): id, tool, arguments (compact JSON, cut to fit), caller,
      scope, reason, deadline`,
    {},
    [0, 0],
    (api, _args, json, ctx) => runApprovals(api, json, ctx),
  ),
  fleetCommand('approvals approve', `  forge approvals approve ID [--reason TEXT]\n      runs the call as it was submitted`, { reason: { type: 'string' } }, [1, 1], (api, args, json, ctx, usage) => {
    const reason = stringOption(args, 'reason');
    return runDecide(api, callIdArgument(args.positionals[0]!, 'forge approvals approve', usage), { decision: 'approve', ...(reason === undefined ? {} : { reason }) }, json, ctx);
  }),
  fleetCommand('approvals deny', `  forge approvals deny ID --reason TEXT\n      refuses the call; the agent sees the reason`, { reason: { type: 'string' } }, [1, 1], (api, args, json, ctx, usage) => {
    const reason = requiredOption(args, 'reason', 'forge approvals deny', usage);
    return runDecide(api, callIdArgument(args.positionals[0]!, 'forge approvals deny', usage), { decision: 'deny', reason }, json, ctx);
  }),
  fleetCommand(
    'approvals modify',
    `  forge approvals modify ID 'JSON' [--reason TEXT]\n      runs the call with these arguments instead (checked against the tool's schema again)`,
    { reason: { type: 'string' } },
    [2, 2],
    (api, args, json, ctx, usage) => {
      const [id, text] = args.positionals as [string, string];
      const reason = stringOption(args, 'reason');
      const decision = { decision: 'modify' as const, arguments: jsonObjectArgument(text, 'arguments', 'forge approvals modify', usage), ...(reason === undefined ? {} : { reason }) };
      return runDecide(api, callIdArgument(id, 'forge approvals modify', usage), decision, json, ctx);
    },
  ),
  fleetCommand(
    'queues',
    `  forge queues
      per tier and pool queue: waiting, active, delayed and failed jobs, and live workers (approver or admin token)`,
    {},
    [0, 0],
    (api, _args, json, ctx) => runQueues(api, json, ctx),
  ),
  {
    name: 'keys init',
    fleet: false,
    usage: `  forge keys init [--dir DIR] [--force]
      writes ${KEY_FILES.tokenPrivate} (mints tokens), ${KEY_FILES.tokenPublic} (dispatchers verify tokens) and
      ${KEY_FILES.signingSecret} (dispatchers sign calls) into DIR (default .forge/keys)`,
    options: { dir: { type: 'string' }, force: { type: 'boolean' } },
    arity: [0, 0],
    run: (args, ctx) => {
      const written = initKeys(stringOption(args, 'dir') ?? '.forge/keys', args.values['force'] === true);
      return Promise.resolve(
        printing(
          ctx,
          `wrote ${written.join(', ')}\nkeep ${KEY_FILES.tokenPrivate} with whoever mints tokens; give dispatchers ${KEY_FILES.tokenPublic} and ${KEY_FILES.signingSecret}, and each worker only its \`forge keys worker-key\``,
        ),
      );
    },
  },
  {
    name: 'keys worker-key',
    fleet: false,
    usage: `  forge keys worker-key --secret FILE --tier platform|embedded|host [--pool NAME] [--prefix PREFIX]
      prints the FORGE_CALL_KEY for the workers of one queue (they can verify, not forge, other queues' calls)`,
    options: { secret: { type: 'string' }, tier: { type: 'string' }, pool: { type: 'string' }, prefix: { type: 'string' } },
    arity: [0, 0],
    run: (args, ctx, usage) => {
      const what = 'forge keys worker-key';
      const tier = TierInput.safeParse(requiredOption(args, 'tier', what, usage));
      if (!tier.success) throw new UsageError(what, `--tier: ${tier.error.issues[0]?.message ?? 'invalid'}`, usage);
      const pool = stringOption(args, 'pool');
      if (pool !== undefined && tier.data !== 'host') throw new UsageError(what, '--pool applies to --tier host only', usage);
      return Promise.resolve(printing(ctx, workerKey(requiredOption(args, 'secret', what, usage), stringOption(args, 'prefix') ?? DEFAULT_FLEET_PREFIX, tier.data, pool)));
    },
  },
  {
    name: 'token mint',
    fleet: false,
    usage: `  forge token mint --key FILE --sub SUBJECT [--role agent|approver|admin] [--task TASK] [--scope a,b.*]
                   [--grant tool,db.*]… [--ttl SECONDS] [--aud AUDIENCE]
      prints an agent capability token (EdDSA JWT) for Authorization: Bearer`,
    options: {
      key: { type: 'string' },
      sub: { type: 'string' },
      role: { type: 'string' },
      task: { type: 'string' },
      // Repeatable: each one adds its patterns (a second --grant used to replace the first, silently).
      scope: { type: 'string', multiple: true },
      grant: { type: 'string', multiple: true },
      ttl: { type: 'string' },
      aud: { type: 'string' },
    },
    arity: [0, 0],
    run: async (args, ctx, usage) => {
      const what = 'forge token mint';
      const role = Role.safeParse(stringOption(args, 'role') ?? 'agent');
      if (!role.success) throw new UsageError(what, `--role must be one of ${Role.options.join(', ')}`, usage);
      const ttl = Number(stringOption(args, 'ttl') ?? 3600);
      if (!Number.isInteger(ttl) || ttl <= 0) throw new UsageError(what, '--ttl must be a positive whole number of seconds', usage);
      const task = stringOption(args, 'task');
      const scope = toolPatternsOption(args, 'scope', what, usage);
      const grants = toolPatternsOption(args, 'grant', what, usage);
      const audience = stringOption(args, 'aud');
      const token = await mint(requiredOption(args, 'key', what, usage), {
        subject: requiredOption(args, 'sub', what, usage),
        role: role.data,
        expiresInSeconds: ttl,
        ...(task === undefined ? {} : { task }),
        ...(scope === undefined ? {} : { scope }),
        ...(grants === undefined ? {} : { grants }),
        ...(audience === undefined ? {} : { audience }),
      });
      return printing(ctx, token);
    },
  },
];

const groupOf = (name: string): string => name.split(' ')[0]!;
const GROUPS = [...new Set(COMMANDS.map((c) => groupOf(c.name)))];

/** The usage of one group of commands (`forge approvals …`), with the fleet options where they apply. */
function groupUsage(group: string): string {
  const lines = COMMANDS.filter((c) => groupOf(c.name) === group).map((c) => c.usage);
  const fleet = COMMANDS.some((c) => groupOf(c.name) === group && c.fleet);
  return `usage:\n${lines.join('\n')}${fleet ? `\n\n${FLEET_OPTIONS_USAGE}` : ''}`;
}

/** `forge --help`. */
export const USAGE = `usage: forge <command> [options]      (forge <command> --help for one command)

fleet:
${COMMANDS.filter((c) => c.fleet)
  .map((c) => c.usage)
  .join('\n')}

${FLEET_OPTIONS_USAGE}

keys and tokens:
${COMMANDS.filter((c) => !c.fleet)
  .map((c) => c.usage)
  .join('\n')}

exit status: 0 done, 1 failed (the fleet refused, or the call failed or was cancelled), 2 a wrong command line`;

/**
 * Runs one `forge` command line, writing to `ctx` (never to the process), and
 * returns its exit status.
 * @throws UsageError (exit 2) for a wrong command line; FleetError with the dispatcher's code; UnreachableError.
 */
export async function runCli(argv: readonly string[], ctx: CliContext): Promise<ExitCode> {
  const [first, second] = argv;
  if (first === undefined || first === 'help' || first === '--help' || first === '-h') return printing(ctx, USAGE);
  const command = COMMANDS.find((c) => c.name === `${first} ${second ?? ''}`) ?? COMMANDS.find((c) => c.name === first);
  if (command === undefined) {
    if (!GROUPS.includes(first)) throw new UsageError('forge', `unknown command '${first}'`, USAGE);
    if (second === '--help' || second === '-h') return printing(ctx, groupUsage(first));
    const subcommands = COMMANDS.filter((c) => groupOf(c.name) === first).map((c) => c.name.split(' ')[1]);
    throw new UsageError(`forge ${first}`, second === undefined ? `name a subcommand: ${subcommands.join(', ')}` : `unknown subcommand '${second}'`, groupUsage(first));
  }
  const usage = groupUsage(first);
  const words = command.name.split(' ').length;
  const args = parseCommandArgs(argv.slice(words), { ...command.options, help: { type: 'boolean', short: 'h' } }, command.arity, `forge ${command.name}`, usage);
  if (args.values['help'] === true) return printing(ctx, usage);
  return command.run(args, ctx, usage);
}

/**
 * Reports what `runCli` threw, as a person should read it — the code and
 * message of fleet errors, the usage after a wrong command line, never a
 * stack trace — and returns the exit status.
 */
export function reportError(error: unknown, stderr: CliContext['stderr']): ExitCode {
  if (error instanceof UsageError) {
    stderr.write(`${error.command}: ${error.problem}\n\n${error.usage}\n`);
    return ExitCode.USAGE;
  }
  if (isFleetError(error)) stderr.write(`forge: ${error.code}: ${printable(error.message)}\n`);
  else if (error instanceof UnreachableError) stderr.write(`forge: ${error.message}\n`);
  else stderr.write(`forge: ${error instanceof Error ? error.message : String(error)}\n`);
  return ExitCode.FAILED;
}
