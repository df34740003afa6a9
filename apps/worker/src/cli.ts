import { parseArgs } from 'node:util';
import { ConfigInvalidError, PoolName, ProcessIsolation, TierInput } from '@forge-fleet/shared';
import { z } from 'zod';

/** Calls a worker runs at once when `--concurrency` is not given (and it serves a tools module). */
export const DEFAULT_CONCURRENCY = 16;

/** The most calls one worker may run at once. */
export const MAX_CONCURRENCY = 10_000;

export const USAGE = 'usage: forge-worker --tier <platform|embedded|host> [--pool NAME] (--tools <module> | --mcp <servers.yaml> | both) [--pack NAME] [--concurrency N] [--id ID] [--strict-sandbox] [--sandbox-isolation caller|call]';

/** The worker's command line. */
export const WorkerArgs = z.object({
  tier: TierInput,
  pool: PoolName.optional(),
  /** A tools module (`defineTool` tools). */
  tools: z.string().min(1).optional(),
  /** An MCP servers file (docs/mcp-servers.md): the servers it places in this worker's lane run here, and their tools are served. */
  mcp: z.string().min(1).optional(),
  /**
   * Names this worker's tool pack, so its queue (`{<prefix>.<lane>}.<pack>`) is known before it starts (an
   * autoscaler watching it). Every worker of a named pack must serve the same tools. @defaultValue a hash of its tools
   */
  pack: PoolName.optional(),
  /**
   * Calls run at once by this process. @defaultValue 16; for a worker of `--mcp` alone, the calls its servers can
   * run at once (each one's `instances.max` × `callsPerInstance`, summed)
   */
  concurrency: z.coerce.number().int().positive().max(MAX_CONCURRENCY).optional(),
  /** @defaultValue `<hostname>-<pid>-<random>` */
  id: z.string().regex(/^[A-Za-z0-9_.-]{1,100}$/).optional(),
  /** Refuse to start with any sandbox isolation layer missing (see FORGE_STRICT_SANDBOX). */
  'strict-sandbox': z.boolean().default(false),
  /** Who one sandbox process may serve (see FORGE_SANDBOX_ISOLATION, which it overrides). @defaultValue "caller" */
  'sandbox-isolation': ProcessIsolation.optional(),
});
export type WorkerArgs = z.infer<typeof WorkerArgs>;

export function parseWorkerArgs(argv: readonly string[]): Readonly<WorkerArgs> {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: [...argv],
      options: { tier: { type: 'string' }, pool: { type: 'string' }, tools: { type: 'string' }, mcp: { type: 'string' }, pack: { type: 'string' }, concurrency: { type: 'string' }, id: { type: 'string' }, 'strict-sandbox': { type: 'boolean' }, 'sandbox-isolation': { type: 'string' } },
      strict: true,
    }));
  } catch (error) {
    throw new ConfigInvalidError('worker arguments', [error instanceof Error ? error.message : String(error), USAGE]);
  }
  const parsed = WorkerArgs.safeParse(values);
  if (!parsed.success) {
    throw new ConfigInvalidError('worker arguments', [...parsed.error.issues.map((i) => `--${i.path.join('.')}: ${i.message}`), USAGE], { cause: parsed.error });
  }
  const args = Object.freeze(parsed.data);
  if (args.pool !== undefined && args.tier !== 'host') throw new ConfigInvalidError('worker arguments', ['--pool applies to --tier host only', USAGE]);
  if (args.tools === undefined && args.mcp === undefined) throw new ConfigInvalidError('worker arguments', ['give --tools <module>, --mcp <servers file>, or both: a worker with neither has nothing to serve', USAGE]);
  return args;
}
