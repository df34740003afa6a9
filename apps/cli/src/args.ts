import { parseArgs } from 'node:util';
import { assertToolPattern, ConfigInvalidError, isFleetError, ToolCallId } from '@forge-fleet/shared';

/**
 * The command line itself is wrong (unknown command or option, a missing or
 * malformed argument): exit code 2, with the usage of the command. A
 * `CONFIG_INVALID` like any bad setting, so callers that only look at codes
 * need nothing new.
 */
export class UsageError extends ConfigInvalidError {
  constructor(
    /** `forge call`, `forge keys init`…: what the problem is about. */
    readonly command: string,
    /** What is wrong, for a person. */
    readonly problem: string,
    /** The usage lines to show with it. */
    readonly usage: string,
    options: { cause?: unknown } = {},
  ) {
    super(command, [problem], options);
  }
}

/** Options a command accepts, in `node:util` `parseArgs` form. */
export type OptionSpec = Readonly<Record<string, { readonly type: 'string' | 'boolean'; readonly short?: string; readonly multiple?: boolean }>>;

/** A command line after `parseArgs`: option values by name, then the positional arguments. */
export interface ParsedArgs {
  readonly values: Readonly<Record<string, string | boolean | readonly (string | boolean)[] | undefined>>;
  readonly positionals: readonly string[];
}

/**
 * Parses one command's arguments strictly: an unknown option, an option
 * without its value, or more or fewer positional arguments than `arity`
 * allows is a {@link UsageError}.
 */
export function parseCommandArgs(argv: readonly string[], options: OptionSpec, arity: readonly [min: number, max: number], command: string, usage: string): ParsedArgs {
  let parsed: ParsedArgs;
  try {
    const { values, positionals } = parseArgs({ args: [...argv], options: { ...options }, strict: true, allowPositionals: true });
    parsed = { values, positionals };
  } catch (error) {
    throw new UsageError(command, error instanceof Error ? error.message : String(error), usage, { cause: error });
  }
  // `--help` needs no other argument to be right.
  if (parsed.values['help'] === true) return parsed;
  const [min, max] = arity;
  if (parsed.positionals.length > max) throw new UsageError(command, `unexpected argument '${parsed.positionals[max]!}'`, usage);
  if (parsed.positionals.length < min) throw new UsageError(command, 'missing arguments', usage);
  return parsed;
}

/** A string option's value, `undefined` when not given. */
export function stringOption(args: ParsedArgs, name: string): string | undefined {
  const value = args.values[name];
  return typeof value === 'string' ? value : undefined;
}

/** A string option that must be given and not empty. */
export function requiredOption(args: ParsedArgs, name: string, command: string, usage: string): string {
  const value = stringOption(args, name);
  if (value === undefined || value === '') throw new UsageError(command, `--${name} is required`, usage);
  return value;
}

/** Splits `a, b.*` into `['a', 'b.*']`; an option given more than once (declared `multiple`) adds each one's list. */
export function listOption(args: ParsedArgs, name: string): string[] | undefined {
  const value = args.values[name];
  const given = typeof value === 'string' ? [value] : Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : undefined;
  return given
    ?.flatMap((v) => v.split(','))
    .map((s) => s.trim())
    .filter(Boolean);
}

/**
 * A list of tool patterns (`--scope`, `--grant`), each checked with the rule
 * the dispatcher applies to a token's scope and grants (`assertToolPattern`):
 * a pattern it refuses would make every call the token sends fail at the
 * approval step, so it is a wrong command line here, naming the pattern.
 * @throws UsageError for a pattern that is not an exact tool name, `prefix.*` or `*`.
 */
export function toolPatternsOption(args: ParsedArgs, name: string, command: string, usage: string): string[] | undefined {
  const patterns = listOption(args, name);
  for (const pattern of patterns ?? []) {
    try {
      assertToolPattern(pattern);
    } catch (error) {
      const reason = isFleetError(error) && typeof error.details['reason'] === 'string' ? error.details['reason'] : `tool pattern ${JSON.stringify(pattern)} is invalid`;
      const hint = pattern.includes('*') ? `; "*" stands alone or ends a pattern after a dot ("db.*" covers db.read and db.write); else list the exact names (--${name} a,b)` : '';
      throw new UsageError(command, `--${name}: ${reason}${hint}`, usage, { cause: error });
    }
  }
  return patterns;
}

/**
 * Parses a JSON object given on the command line (a call's arguments).
 * @throws UsageError saying what is wrong and how to quote it.
 */
export function jsonObjectArgument(text: string, what: string, command: string, usage: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new UsageError(command, `${what} are not valid JSON (${reason}); pass one JSON object in single quotes, e.g. '{"n": 1}'`, usage, { cause: error });
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    const kind = value === null ? 'null' : Array.isArray(value) ? 'an array' : `a ${typeof value}`;
    throw new UsageError(command, `${what} must be a JSON object, e.g. '{"n": 1}', not ${kind}`, usage);
  }
  return value as Record<string, unknown>;
}

/** A call id as the API accepts it (checked here so a typo fails before anything is sent). */
export function callIdArgument(text: string, command: string, usage: string): string {
  const parsed = ToolCallId.safeParse(text);
  if (!parsed.success) throw new UsageError(command, `call id '${text}' ${parsed.error.issues[0]?.message ?? 'is invalid'}`, usage);
  return parsed.data;
}

/** A positive number of seconds (fractions allowed), as milliseconds. */
export function secondsOption(args: ParsedArgs, name: string, command: string, usage: string): number | undefined {
  const text = stringOption(args, name);
  if (text === undefined) return undefined;
  const seconds = Number(text);
  if (text.trim() === '' || !Number.isFinite(seconds) || seconds <= 0) throw new UsageError(command, `--${name} must be a positive number of seconds, got '${text}'`, usage);
  return Math.ceil(seconds * 1000);
}
