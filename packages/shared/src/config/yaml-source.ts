import { ConfigInvalidError } from '../errors/errors.js';
import { deepFlowAt } from './flow-depth.js';

export { type FilePositions, problemAt, schemaProblems } from './file-problems.js';
import { MAX_JSON_DEPTH, parseJsonSource } from './json-source.js';
import { LOST_KEY_PROBLEM, lostKeyPaths } from './lost-keys.js';
import { yamlErrorText } from './yaml-errors.js';
import { type Alias, type Document, isCollection, isMap, isNode, isScalar, LineCounter, parseDocument, visit } from 'yaml';

/**
 * A YAML or JSON document with the position of each of its parts: what the
 * configuration files (the dispatcher's policy file, a worker's servers file)
 * are read with, so that they say their mistakes alike. Its own entry point
 * (`@forge-fleet/shared/yaml-source`), so that only they load the parser.
 */
export interface YamlSource {
  /** The document as plain JavaScript values. */
  readonly value: unknown;
  /**
   * `file:line:col` of the deepest node on `path` that exists in the file (a
   * missing key points at the object that lacks it), else the file's name.
   * With `key`, the last step's key rather than its value: for an error in the key itself.
   */
  where(path: readonly PropertyKey[], options?: { readonly key?: boolean }): string;
}

/**
 * Parses a configuration file's `text`, read from `file`: a file named
 * `*.json` as strict JSON, any other as YAML. Not YAML for both, though YAML
 * reads most JSON: it also reads what JSON forbids (a trailing comma, a
 * comment), so a `.json` file that every other JSON tool refuses would load.
 * Either way duplicate keys and `__proto__` are refused, and every error
 * names `file:line:col`.
 * @throws ConfigInvalidError as {@link parseYamlSource} and `parseJsonSource` do.
 */
export function parseConfigSource(file: string, text: string, what: string): YamlSource {
  if (!/\.json$/i.test(file)) return parseYamlSource(file, text, what);
  return refuseLostKeys(parseJsonSource(file, text, what), what);
}

/**
 * Parses `text`, read from `file`, as YAML, keeping node positions.
 * @throws ConfigInvalidError (`invalid <what>: file:line:col: …`, saying what to change) for every syntax error,
 *   duplicate keys and a second document included, aliases of no anchor or that expand too often, a list or map
 *   as a key, flow collections nested deeper than JSON may be, and each key a JavaScript object would drop
 *   (`__proto__`, see lost-keys.ts).
 */
export function parseYamlSource(file: string, text: string, what: string): YamlSource {
  // The bound JSON files have; before the parser, which a flow nested 100,000 deep takes down (flow-depth.ts).
  const deep = deepFlowAt(text, MAX_JSON_DEPTH);
  if (deep !== undefined) {
    const before = text.slice(0, deep);
    const line = before.split('\n').length;
    throw new ConfigInvalidError(what, [`${file}:${line}:${deep - before.lastIndexOf('\n')}: nested deeper than ${MAX_JSON_DEPTH} levels; flatten the file`]);
  }
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, prettyErrors: false });
  const at = (offset: number): string => {
    const { line, col } = lines.linePos(offset);
    return `${file}:${line}:${col}`;
  };
  // The parser may find the same error at the same place several times (an unclosed `{`): each is said once.
  if (doc.errors.length > 0) throw new ConfigInvalidError(what, [...new Set(doc.errors.map((e) => `${at(e.pos[0])}: ${yamlErrorText(e, text, doc)}`))]);
  refuseCollectionKeys(doc, what, at);
  const source: YamlSource = {
    value: plainValue(doc, what, at, file),
    where(path, options = {}) {
      if (options.key === true && path.length > 0) {
        const parent = doc.getIn(path.slice(0, -1) as (string | number)[], true);
        const pair = isMap(parent) ? parent.items.find((p) => (isScalar(p.key) ? p.key.value : p.key) === path[path.length - 1]) : undefined;
        if (isNode(pair?.key) && pair.key.range) return at(pair.key.range[0]);
      }
      let node: unknown;
      for (let depth = path.length; depth >= 0 && !isNode(node); depth--) node = doc.getIn(path.slice(0, depth) as (string | number)[], true);
      return isNode(node) && node.range !== undefined && node.range !== null ? at(node.range[0]) : file;
    },
  };
  return refuseLostKeys(source, what);
}

/** `source`, unless it has a key a JavaScript object would drop (`__proto__`, see lost-keys.ts): each is refused at its place. */
function refuseLostKeys(source: YamlSource, what: string): YamlSource {
  const lost = lostKeyPaths(source.value);
  if (lost.length > 0) throw new ConfigInvalidError(what, lost.map((p) => `${source.where(p, { key: true })}: ${p.join('.')}: ${LOST_KEY_PROBLEM}`));
  return source;
}

/**
 * Refuses a list or map as a key (`? [a, b]: 1`): a JavaScript object would
 * turn it into text, and the parser would say so only on stderr, in words of
 * its API.
 */
function refuseCollectionKeys(doc: Document, what: string, at: (offset: number) => string): void {
  const problems: string[] = [];
  visit(doc, {
    Pair(_key, pair) {
      if (isCollection(pair.key)) problems.push(`${at(pair.key.range?.[0] ?? 0)}: a key must be a name, not a list or map; write it as a plain name`);
    },
  });
  if (problems.length > 0) throw new ConfigInvalidError(what, problems);
}

/**
 * The document's plain value. The parser throws a bare ReferenceError for an
 * alias (`*name`) of no anchor before it, and for aliases that expand past
 * its limit — aliases of aliases grow exponentially ("billion laughs"); here
 * each is a CONFIG_INVALID at its alias (the file's first, for the latter),
 * like any other mistake in the file.
 */
function plainValue(doc: Document, what: string, at: (offset: number) => string, file: string): unknown {
  try {
    return doc.toJS();
  } catch (error) {
    if (!(error instanceof ReferenceError)) throw error;
    // One pass in document order, the order in which the parser looks for an alias's anchor.
    const anchors = new Set<string>();
    let first: Alias | undefined;
    let unresolved: Alias | undefined;
    visit(doc, {
      Alias(_key, node) {
        first ??= node;
        if (anchors.has(node.source)) return undefined;
        unresolved = node;
        return visit.BREAK;
      },
      Node(_key, node) {
        if (node.anchor !== undefined) anchors.add(node.anchor);
      },
    });
    const where = (node: Alias | undefined): string => (node?.range ? at(node.range[0]) : file);
    if (unresolved !== undefined) {
      const name = unresolved.source;
      throw new ConfigInvalidError(what, [`${where(unresolved)}: the alias *${name} names no anchor before it; put &${name} on a value above it, or write the value out`]);
    }
    throw new ConfigInvalidError(what, [`${where(first)}: the file expands its aliases (*name) too often (${error.message}); write the values out instead`]);
  }
}
