import { readFileSync } from 'node:fs';
import { ConfigInvalidError } from '../errors/errors.js';

/**
 * A binary secret from the environment: `NAME` holds it base64(url)-encoded,
 * or `NAME_FILE` names a file that does (the form container orchestrators
 * mount secrets in). Read once at start-up.
 *
 * @throws ConfigInvalidError when it is missing, unreadable or shorter than `minBytes`.
 */
export function secretFromEnv(env: Readonly<Record<string, string | undefined>>, name: string, what: string, minBytes = 32): Buffer {
  const text = textFromEnv(env, name, what);
  if (text === undefined) throw new ConfigInvalidError(what, [`${name}: set ${name} (base64url) or ${name}_FILE (a file holding it); \`forge keys init\` generates one`]);
  const bytes = Buffer.from(text.trim(), 'base64');
  if (bytes.byteLength < minBytes) throw new ConfigInvalidError(what, [`${name}: must decode to at least ${minBytes} bytes of base64url, got ${bytes.byteLength}`]);
  return bytes;
}

/**
 * A value given inline (`NAME`) or as a file (`NAME_FILE`, the form container
 * orchestrators mount secrets in); `undefined` when neither is set. Inline wins.
 * @throws ConfigInvalidError when the file cannot be read.
 */
export function textFromEnv(env: Readonly<Record<string, string | undefined>>, name: string, what: string): string | undefined {
  const inline = env[name];
  if (inline !== undefined && inline !== '') return inline;
  const file = env[`${name}_FILE`];
  if (file === undefined || file === '') return undefined;
  try {
    return readFileSync(file, 'utf8');
  } catch (error) {
    throw new ConfigInvalidError(what, [`${name}_FILE: cannot read ${file}: ${error instanceof Error ? error.message : String(error)}`], { cause: error });
  }
}
