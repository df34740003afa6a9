import { type Document, type ErrorCode, isScalar, visit, type YAMLError } from 'yaml';

/** The fix of a duplicate key, in the words the JSON reader uses too. */
const UNIQUE_KEYS = 'keys must be unique: remove or rename one';

/**
 * What to change, for each kind of syntax error the YAML parser reports: said
 * after its own words, which say what is wrong but not what to do. Typed by
 * the parser's own list of codes, so a code added to it is a type error here
 * until it has its fix.
 */
const YAML_FIXES: { readonly [C in ErrorCode]: string | ((message: string) => string) } = {
  ALIAS_PROPS: 'remove the tag or anchor before the alias (*name)',
  BAD_ALIAS: 'name the anchor and alias (&name, *name) with letters, digits, "_" or "-"',
  BAD_COLLECTION_TYPE: 'remove the tag (!!set, !!map…): a configuration file needs none',
  BAD_DIRECTIVE: 'remove the "%" directive line: a configuration file needs none',
  BAD_DQ_ESCAPE: 'in "double quotes" a backslash starts an escape (\\n, \\t, \\", \\\\): write \\\\ for a backslash, or use single quotes',
  BAD_INDENT: (message) => {
    const close = /end with an? ([}\]])/.exec(message)?.[1];
    if (close !== undefined) return `close it with "${close}", and indent its lines deeper than its key`;
    return 'indent with spaces so that the keys of one map (or the "- " items of one list) start at the same column, deeper than the key they belong to';
  },
  BAD_PROP_ORDER: 'write the anchor (&name) or tag after the "-" or "?" it stands beside',
  BAD_SCALAR_START: 'quote the value',
  BLOCK_AS_IMPLICIT_KEY: 'put a nested map on the lines below its key, indented, or write it as { key: value }',
  BLOCK_IN_FLOW: 'inside { } or [ ] separate the items with ",", and write a nested map or list as { } or [ ]',
  DUPLICATE_KEY: UNIQUE_KEYS,
  IMPOSSIBLE: 'check the syntax here',
  KEY_OVER_1024_CHARS: 'shorten the key to at most 1024 characters, or look above it for a missing ":" or an unclosed quote',
  MISSING_CHAR: (message) => {
    const quote = /closing (["'])quote/.exec(message)?.[1];
    if (quote !== undefined) return `close the string opened with ${quote} before this point`;
    if (/map keys need to be followed by map values/i.test(message)) return 'write "key: value" (a ":" and a space after the key), or "- item" for an item of a list';
    if (/Missing , or :/.test(message)) return 'separate the items with ",", and each key from its value with ": "';
    if (/Missing ,/.test(message)) return 'separate the items with ","';
    if (/space after :/.test(message)) return 'add a space after ":"';
    if (/separated .* white space/.test(message)) return 'add a space there';
    if (/indicator line/.test(message)) return 'start the document with a "---" line';
    return 'add what is missing';
  },
  MULTILINE_IMPLICIT_KEY: 'write each key and its ":" on one line (a line above without ":", or with an unclosed quote, can cause this)',
  MULTIPLE_ANCHORS: 'keep one anchor (&name)',
  // Said in full by yamlErrorText: the parser's words name one of its functions.
  MULTIPLE_DOCS: 'keep one document',
  MULTIPLE_TAGS: 'keep one tag',
  NON_STRING_KEY: 'write the key as a plain name',
  RESOURCE_EXHAUSTION: 'write the values out instead of aliasing them',
  TAB_AS_INDENT: 'indent with spaces',
  TAG_RESOLVE_FAILED: 'remove the tag (!!set, !!map…): a configuration file needs none',
  UNEXPECTED_TOKEN: 'remove it, or quote the whole value it belongs to',
};

/**
 * A YAML syntax error as a configuration file's reader says it: what is wrong
 * and what to change, in words of the file and never of the parser's API
 * ("please use YAML.parseAllDocuments()" becomes "the file holds more than
 * one YAML document … keep one").
 * @param text the file's text; @param doc the document the error came with.
 */
export function yamlErrorText(error: YAMLError, text: string, doc: Document): string {
  const offset = error.pos[0];
  switch (error.code) {
    case 'MULTIPLE_DOCS': {
      const what = text.startsWith('---', offset) ? 'remove this "---" line and the document after it, or merge that document into the first' : 'remove the document from here on, or merge it into the first';
      return `the file holds more than one YAML document, a second one starting here; keep one: ${what}`;
    }
    case 'DUPLICATE_KEY': {
      const key = keyAt(doc, offset);
      if (key !== undefined) return `key ${JSON.stringify(key)} appears twice in one map; ${UNIQUE_KEYS}`;
      break;
    }
    default:
      break;
  }
  const fix = YAML_FIXES[error.code];
  return `${plainWords(error.message)}; ${typeof fix === 'string' ? fix : fix(error.message)}`;
}

/** The parser's words, without its names for tokens (`flow-map-end token in YAML stream`). */
function plainWords(message: string): string {
  const token = /^Unexpected [\w-]+ token in YAML stream: (".*")$/.exec(message);
  if (token?.[1] !== undefined) return `unexpected ${token[1]}`;
  if (/^Unexpected scalar at node end$/.test(message)) return 'unexpected text after a value';
  return message;
}

/** The scalar key that starts at `offset`, as the file means it. */
function keyAt(doc: Document, offset: number): string | undefined {
  let key: string | undefined;
  visit(doc, {
    Pair(_key, pair) {
      if (isScalar(pair.key) && pair.key.range?.[0] === offset) {
        key = String(pair.key.value);
        return visit.BREAK;
      }
      return undefined;
    },
  });
  return key;
}
