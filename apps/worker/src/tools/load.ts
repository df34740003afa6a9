import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { ConfigInvalidError, isFleetError, parseToolDefinition, type Tier, type Tool, type ToolExecutor } from '@forge-fleet/shared';

function looksLikeTool(value: unknown): value is { definition: unknown; executor: ToolExecutor | undefined } {
  return typeof value === 'object' && value !== null && 'definition' in value;
}

/**
 * Loads a tools module: an ES module whose default export is an array of
 * tools made with `defineTool`. TypeScript modules are loaded through tsx.
 *
 * @throws ConfigInvalidError when the module cannot be loaded or exports no tools.
 */
export async function loadToolsModule(path: string): Promise<Tool[]> {
  const file = resolve(path);
  if (/\.[cm]?ts$/.test(file)) {
    // Registering tsx lets people write tool modules in TypeScript without a build step.
    const { register } = await import('tsx/esm/api');
    register();
  }
  let mod: { default?: unknown };
  try {
    mod = (await import(pathToFileURL(file).href)) as { default?: unknown };
  } catch (error) {
    // A definition refused as the module ran (defineTool throws INVALID_DEFINITION) keeps its code and its message.
    if (isFleetError(error)) throw error;
    throw new ConfigInvalidError('tools module', [`cannot load ${file}: ${error instanceof Error ? error.message : String(error)}`], { cause: error });
  }
  const tools = mod.default;
  if (!Array.isArray(tools) || !tools.every(looksLikeTool)) {
    throw new ConfigInvalidError('tools module', [`${file} must export default an array of tools made with defineTool()`]);
  }
  // Re-check each definition: the module may use another copy of the shared package.
  return tools.map((t) => ({ definition: parseToolDefinition(t.definition, { strict: false }), executor: t.executor }));
}

/**
 * The tools this worker serves: those of its tier (and, for host workers, its
 * pool). A module may hold tools of several tiers.
 *
 * @throws ConfigInvalidError when that leaves none, naming what the module has.
 */
export function selectTools(tools: readonly Tool[], tier: Tier, pool: string | undefined): Tool[] {
  const mine = tools.filter((t) => t.definition.tier === tier && (tier !== 'host' || t.definition.pool === pool));
  if (mine.length === 0) {
    const has = tools.map((t) => `${t.definition.name} (${t.definition.tier}${t.definition.pool === undefined ? '' : `, pool ${t.definition.pool}`})`);
    throw new ConfigInvalidError('worker tools', [
      `the module has no ${tier}-tier tools${tier === 'host' ? ` for pool ${pool ?? '(default)'}` : ''} to serve; it has: ${has.join(', ') || 'nothing'}`,
    ]);
  }
  const missing = mine.filter((t) => t.executor === undefined).map((t) => t.definition.name);
  if (missing.length > 0) throw new ConfigInvalidError('worker tools', [`tools without a handler cannot be served: ${missing.join(', ')}`]);
  return mine;
}
