import { parseArgs } from 'node:util';
import { ConfigInvalidError, DEFAULT_FLEET_PREFIX, Role, TierInput } from '@forge-fleet/shared';
import { initKeys, KEY_FILES, workerKey } from './commands/keys.js';
import { mint } from './commands/token.js';

export const USAGE = `usage:
  forge keys init [--dir DIR] [--force]
      writes ${KEY_FILES.tokenPrivate} (mints tokens), ${KEY_FILES.tokenPublic} (dispatchers verify tokens) and
      ${KEY_FILES.signingSecret} (dispatchers sign calls) into DIR (default .forge/keys)
  forge keys worker-key --secret FILE --tier platform|embedded|host [--pool NAME] [--prefix PREFIX]
      prints the FORGE_CALL_KEY for the workers of one queue (they can verify, not forge, other queues' calls)
  forge token mint --key FILE --sub SUBJECT [--role agent|approver|admin] [--task TASK] [--scope a,b.*]
                   [--grant tool,db.*] [--ttl SECONDS] [--aud AUDIENCE]
      prints an agent capability token (EdDSA JWT) for Authorization: Bearer`;

const list = (value: string | undefined): string[] | undefined => (value === undefined ? undefined : value.split(',').map((s) => s.trim()).filter(Boolean));

function options(argv: readonly string[], spec: Record<string, { type: 'string' | 'boolean' }>, what: string): Record<string, string | boolean | undefined> {
  try {
    return parseArgs({ args: [...argv], options: spec, strict: true, allowPositionals: false }).values;
  } catch (error) {
    throw new ConfigInvalidError(what, [error instanceof Error ? error.message : String(error), USAGE]);
  }
}

function required(values: Record<string, string | boolean | undefined>, name: string, what: string): string {
  const value = values[name];
  if (typeof value !== 'string' || value === '') throw new ConfigInvalidError(what, [`--${name} is required`, USAGE]);
  return value;
}

/**
 * Runs one `forge` command; returns what it prints. Kept apart from the
 * process (no exit, no stdout) so tests run it directly.
 * @throws ConfigInvalidError for bad arguments or unusable key files.
 */
export async function runCli(argv: readonly string[]): Promise<string> {
  const [group, command, ...rest] = argv;
  if (group === undefined || group === 'help' || argv.includes('--help') || argv.includes('-h')) return USAGE;
  if (group === 'keys' && command === 'init') {
    const v = options(rest, { dir: { type: 'string' }, force: { type: 'boolean' } }, 'forge keys init');
    const written = initKeys(typeof v.dir === 'string' ? v.dir : '.forge/keys', v.force === true);
    return `wrote ${written.join(', ')}\nkeep ${KEY_FILES.tokenPrivate} with whoever mints tokens; give dispatchers ${KEY_FILES.tokenPublic} and ${KEY_FILES.signingSecret}, and each worker only its \`forge keys worker-key\``;
  }
  if (group === 'keys' && command === 'worker-key') {
    const what = 'forge keys worker-key';
    const v = options(rest, { secret: { type: 'string' }, tier: { type: 'string' }, pool: { type: 'string' }, prefix: { type: 'string' } }, what);
    const tier = TierInput.safeParse(required(v, 'tier', what));
    if (!tier.success) throw new ConfigInvalidError(what, [`--tier: ${tier.error.issues[0]?.message ?? 'invalid'}`, USAGE]);
    const pool = typeof v.pool === 'string' ? v.pool : undefined;
    if (pool !== undefined && tier.data !== 'host') throw new ConfigInvalidError(what, ['--pool applies to --tier host only']);
    return workerKey(required(v, 'secret', what), typeof v.prefix === 'string' ? v.prefix : DEFAULT_FLEET_PREFIX, tier.data, pool);
  }
  if (group === 'token' && command === 'mint') {
    const what = 'forge token mint';
    const v = options(
      rest,
      { key: { type: 'string' }, sub: { type: 'string' }, role: { type: 'string' }, task: { type: 'string' }, scope: { type: 'string' }, grant: { type: 'string' }, ttl: { type: 'string' }, aud: { type: 'string' } },
      what,
    );
    const role = Role.safeParse(v.role ?? 'agent');
    if (!role.success) throw new ConfigInvalidError(what, [`--role must be one of ${Role.options.join(', ')}`]);
    const ttl = Number(v.ttl ?? 3600);
    if (!Number.isInteger(ttl) || ttl <= 0) throw new ConfigInvalidError(what, ['--ttl must be a positive whole number of seconds']);
    const scope = list(typeof v.scope === 'string' ? v.scope : undefined);
    const grants = list(typeof v.grant === 'string' ? v.grant : undefined);
    return mint(required(v, 'key', what), {
      subject: required(v, 'sub', what),
      role: role.data,
      expiresInSeconds: ttl,
      ...(typeof v.task === 'string' ? { task: v.task } : {}),
      ...(scope === undefined ? {} : { scope }),
      ...(grants === undefined ? {} : { grants }),
      ...(typeof v.aud === 'string' ? { audience: v.aud } : {}),
    });
  }
  throw new ConfigInvalidError('forge', [`unknown command '${[group, command].filter(Boolean).join(' ')}'`, USAGE]);
}
