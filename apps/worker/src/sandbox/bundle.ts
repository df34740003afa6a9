import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, extname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ConfigInvalidError } from '@forge-fleet/shared';
import { build } from 'esbuild';

/** One JavaScript file holding the sandbox runtime and the tools module, in a private temp directory. */
export interface SandboxBundle {
  readonly path: string;
  remove(): Promise<void>;
}

/** A module of the sandbox runtime in the same form as this file: TypeScript when run from sources, JavaScript from dist. */
function siblingPath(name: string): string {
  const here = fileURLToPath(import.meta.url);
  return join(dirname(here), `${name}${extname(here)}`);
}

/**
 * Bundles the tools module once, so sandbox processes run plain JavaScript
 * from a single file: TypeScript loaders such as tsx need to spawn esbuild,
 * which a sandbox may not do, and a single file is the only read grant needed.
 *
 * @throws ConfigInvalidError when the module cannot be bundled.
 */
export async function bundleTools(modulePath: string, conditions: readonly string[]): Promise<SandboxBundle> {
  const dir = await mkdtemp(join(tmpdir(), 'forge-sandbox-'));
  const path = join(dir, 'sandbox.mjs');
  // Imports run in order: the guards are in place before any tool code is evaluated.
  const entry = [
    `import ${JSON.stringify(siblingPath('harden'))};`,
    `import tools from ${JSON.stringify(resolve(modulePath))};`,
    `import { serveSandbox } from ${JSON.stringify(siblingPath('runtime'))};`,
    'serveSandbox(tools);',
  ].join('\n');
  try {
    await build({
      stdin: { contents: entry, resolveDir: process.cwd(), sourcefile: 'forge-sandbox-entry.mjs', loader: 'js' },
      bundle: true,
      platform: 'node',
      format: 'esm',
      target: 'node20',
      conditions: [...conditions],
      outfile: path,
      logLevel: 'silent',
      // CommonJS dependencies call require(); give the ESM bundle one.
      banner: { js: "import { createRequire as __forgeCreateRequire } from 'node:module'; const require = __forgeCreateRequire(import.meta.url);" },
    });
  } catch (error) {
    await rm(dir, { recursive: true, force: true });
    throw new ConfigInvalidError('sandbox tools module', [`cannot bundle ${modulePath} for the sandbox: ${error instanceof Error ? error.message : String(error)}`], { cause: error });
  }
  return { path, remove: () => rm(dir, { recursive: true, force: true }) };
}
