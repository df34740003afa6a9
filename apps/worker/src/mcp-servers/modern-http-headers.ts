/**
 * The request headers MCP 2026-07-28's Streamable HTTP requires beside the
 * body, so that a load balancer or gateway can route a request without
 * reading it: `MCP-Protocol-Version` and `Mcp-Method` on every request,
 * `Mcp-Name` mirroring the name (or URI, or task) a request is about, and one
 * `Mcp-Param-{Name}` per input property a tool declares with `x-mcp-header`.
 * A server checks each against the body and refuses a request whose headers
 * are missing or disagree (HTTP 400, JSON-RPC -32020).
 */

/** The body field `Mcp-Name` mirrors, by method. */
const NAME_FIELD: Readonly<Record<string, string>> = {
  'tools/call': 'name',
  'prompts/get': 'name',
  'resources/read': 'uri',
  'tasks/get': 'taskId',
  'tasks/update': 'taskId',
  'tasks/cancel': 'taskId',
};

/** The schema keyword that puts an input property into a header of its own. */
const HEADER_KEYWORD = 'x-mcp-header';

/** An HTTP field name (RFC 9110 token): a declaration naming anything else is ignored, never sent malformed. */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/** How deep in `properties` declarations are looked for: a schema nested deeper (a hostile one, a million levels) is not walked down. */
const MAX_DEPTH = 32;

/** The property types a header may carry: `number` is left out by the revision itself. */
const HEADER_TYPES = new Set(['string', 'integer', 'boolean']);

const BASE64_START = '=?base64?';
const BASE64_END = '?=';

/** One input property a tool sends as a header: where it sits in the arguments, and the header's name after `Mcp-Param-`. */
export interface ParamHeader {
  readonly path: readonly string[];
  readonly name: string;
}

/**
 * The value as an HTTP field value: plain printable ASCII passes as it is;
 * anything else (other characters, surrounding blanks, empty, or what looks
 * like the encoding itself) is sent as `=?base64?{UTF-8 in base64}?=`.
 */
export function headerValue(value: string): string {
  const plain = value !== '' && value === value.trim() && !(value.startsWith(BASE64_START) && value.endsWith(BASE64_END)) && /^[\t\x20-\x7e]*$/.test(value);
  return plain ? value : `${BASE64_START}${Buffer.from(value, 'utf8').toString('base64')}${BASE64_END}`;
}

/**
 * The `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name` headers of one
 * request, and the `Mcp-Param-*` ones of a `tools/call` of a tool whose
 * declarations are in `params`.
 */
export function standardHeaders(revision: string, method: string, params: unknown, paramHeaders: readonly ParamHeader[] = []): Record<string, string> {
  const headers: Record<string, string> = { 'mcp-protocol-version': revision, 'mcp-method': method };
  const body = isObject(params) ? params : {};
  const field = Object.hasOwn(NAME_FIELD, method) ? NAME_FIELD[method] : undefined;
  const name = field === undefined ? undefined : body[field];
  if (typeof name === 'string') headers['mcp-name'] = headerValue(name);
  if (method !== 'tools/call') return headers;
  const args = body.arguments;
  for (const declared of paramHeaders) {
    const text = primitiveText(valueAt(args, declared.path));
    // Absent, null or not a primitive: no header, which is what the revision asks for a missing value.
    if (text !== undefined) headers[`mcp-param-${declared.name.toLowerCase()}`] = headerValue(text);
  }
  return headers;
}

/**
 * The properties of a tool's input schema declared with `x-mcp-header`: only
 * those reached from the root through `properties` alone, of a primitive type,
 * with a name that is a valid header name, as the revision allows. A server
 * whose tool declares more than that has its other declarations ignored (it
 * refuses such a tool's calls itself, which the call's error then says).
 */
export function paramHeadersOf(inputSchema: unknown): ParamHeader[] {
  const found: ParamHeader[] = [];
  const seen = new Set<string>();
  const walk = (schema: unknown, path: readonly string[]): void => {
    if (path.length >= MAX_DEPTH || !isObject(schema) || !isObject(schema.properties)) return;
    for (const [key, property] of Object.entries(schema.properties)) {
      if (!isObject(property)) continue;
      const name = property[HEADER_KEYWORD];
      if (typeof name === 'string' && TOKEN.test(name) && typeof property.type === 'string' && HEADER_TYPES.has(property.type) && !seen.has(name.toLowerCase())) {
        seen.add(name.toLowerCase());
        found.push({ path: [...path, key], name });
      }
      walk(property, [...path, key]);
    }
  };
  walk(inputSchema, []);
  return found;
}

function primitiveText(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (typeof value === 'boolean') return value ? 'true' : 'false';
  if (typeof value === 'number' && Number.isFinite(value) && (!Number.isInteger(value) || Number.isSafeInteger(value))) return String(value);
  return undefined;
}

function valueAt(root: unknown, path: readonly string[]): unknown {
  let node = root;
  for (const key of path) {
    if (!isObject(node) || !Object.hasOwn(node, key)) return undefined;
    node = node[key];
  }
  return node;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
