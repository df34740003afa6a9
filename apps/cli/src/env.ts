import { parseConfig } from '@forge-fleet/shared';
import { z } from 'zod';

/** An unset variable and an empty one mean the same to a shell user (`FORGE_TOKEN= forge tools`). */
const optional = z.preprocess((v) => (v === '' ? undefined : v), z.string().optional());

/** The CLI's environment. Parsed once in main.ts; nothing else reads `process.env`. */
export const CliEnv = z.object({
  /** The dispatcher the fleet commands talk to; `--url` wins. */
  FORGE_URL: optional,
  /** Bearer token of the fleet commands; `--token` wins. */
  FORGE_TOKEN: optional,
  /** Where `npm start` writes `dev.json` (its URL and development token). @defaultValue ".forge" */
  FORGE_STATE_DIR: z.preprocess((v) => (v === '' ? undefined : v), z.string().default('.forge')),
});
export type CliEnv = z.infer<typeof CliEnv>;

/** @throws ConfigInvalidError naming the variable that is wrong. */
export function parseCliEnv(env: NodeJS.ProcessEnv): Readonly<CliEnv> {
  return parseConfig(CliEnv, env, 'forge environment');
}
