import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inspect } from 'node:util';
import { describe, expect, it } from 'vitest';
import { revealAll, SecretValue } from './secret-value.js';
import { poolOptionsOf } from './pool-options-of.js';
import { loadServersFile, prefixedToolName, SERVER_DEFAULTS, type StdioTransport, type HttpTransport } from './servers-file.js';

const dir = mkdtempSync(join(tmpdir(), 'forge-mcp-servers-'));
mkdirSync(join(dir, 'data', 'out'), { recursive: true });
const file = (name: string, text: string): string => {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
};
const noEnv = {};

/** The message of the ConfigInvalidError that loading `path` throws. */
function failure(path: string, env: Readonly<Record<string, string | undefined>> = noEnv): string {
  try {
    loadServersFile(path, env);
  } catch (error) {
    expect(error).toMatchObject({ code: 'CONFIG_INVALID' });
    return (error as Error).message;
  }
  throw new Error(`${path} loaded, but a problem was expected`);
}

describe('servers files', () => {
  it('reads a YAML file, applying the defaults and making paths absolute', () => {
    const path = file(
      'ok.yaml',
      [
        'version: 1',
        'servers:',
        '  files:',
        '    command: npx',
        '    args: ["-y", "@modelcontextprotocol/server-filesystem", ./data]',
        '    cwd: ./data',
        '    env: { MODE: fast }',
        '    tier: platform',
        '    filesystem: { read: [./data], write: [data/out] }',
        '    instances: { max: 4 }',
        '    tools: { write_file: { requiresConfirmation: true, timeoutMs: 5000 } }',
        '  github:',
        '    url: https://mcp.example.com/mcp',
        '    headers: { X-Team: fleet }',
        '    prefix: gh',
        '    pool: github',
        '    session: perCaller',
        '    idleMs: 1000',
        '',
      ].join('\n'),
    );
    const { servers, source } = loadServersFile(path, noEnv);
    expect(source).toBe(path);
    expect(servers.map((s) => s.name)).toEqual(['files', 'github']);
    const [files, github] = servers;
    expect(files).toEqual({
      name: 'files',
      prefix: 'files',
      transport: { kind: 'stdio', command: 'npx', args: ['-y', '@modelcontextprotocol/server-filesystem', './data'], cwd: join(dir, 'data'), env: { MODE: 'fast' } },
      tier: 'platform',
      pool: undefined,
      filesystem: { read: [join(dir, 'data')], write: [join(dir, 'data', 'out')] },
      instances: { min: SERVER_DEFAULTS.instances.min, max: 4 },
      callsPerInstance: SERVER_DEFAULTS.callsPerInstance,
      startupTimeoutMs: SERVER_DEFAULTS.startupTimeoutMs,
      restartBackoff: SERVER_DEFAULTS.restartBackoff,
      crashLoop: SERVER_DEFAULTS.crashLoop,
      session: 'shared',
      idleMs: SERVER_DEFAULTS.idleMs,
      tools: { write_file: { requiresConfirmation: true, timeoutMs: 5000 } },
    });
    expect(github).toMatchObject({ prefix: 'gh', tier: 'host', pool: 'github', session: 'perCaller', idleMs: 1000, filesystem: undefined, transport: { kind: 'http', url: 'https://mcp.example.com/mcp', headers: { 'X-Team': 'fleet' } } });
    expect(Object.isFrozen(files) && Object.isFrozen(files!.transport) && Object.isFrozen(servers)).toBe(true);
  });

  it('reads JSON alike, and `external` as another name for the host tier', () => {
    const path = file('ok.json', JSON.stringify({ version: 1, servers: { echo: { command: 'node', args: ['server.js'], tier: 'external' } } }, null, 2));
    const [echo] = loadServersFile(path, noEnv).servers;
    expect(echo).toMatchObject({ name: 'echo', prefix: 'echo', tier: 'host', transport: { kind: 'stdio', command: 'node', args: ['server.js'], cwd: undefined, env: {} } });
  });

  it('refuses a YAML file whose flow collections nest deeper than a JSON file may, before the parser (100,000 brackets took the process down)', () => {
    const deep = failure(file('deep.yaml', `version: 1\nservers: {}\nx: ${'['.repeat(100_000)}${']'.repeat(100_000)}\n`));
    expect(deep).toMatch(/deep\.yaml:3:132: nested deeper than 128 levels; flatten the file/);
    // Within the bound, and brackets inside scalars, are read as before.
    const text = `version: 1\nservers:\n  a:\n    command: x\n    args: ["^[a-z${'['.repeat(200)}", '[[''']\n    env: { A: "x[1" }\n  b:\n    command: y\n    args:\n      - ^[a-z${'['.repeat(200)}\n      - x[1]\n`;
    const [a, b] = loadServersFile(file('brackets.yaml', text), noEnv).servers;
    expect((a?.transport as StdioTransport).args).toEqual([`^[a-z${'['.repeat(200)}`, "[['"]);
    expect((b?.transport as StdioTransport).args).toEqual([`^[a-z${'['.repeat(200)}`, 'x[1]']);
  });

  it('reads a .json file as strict JSON, refusing what only YAML allows with file:line:col and what to fix', () => {
    const strict = /a \.json file is read as strict JSON .*: fix it there, or rename the file \.yaml to write YAML/;
    // YAML reads this trailing comma without a word; no JSON tool does.
    const comma = failure(file('bad.json', '{"version":1,"servers":{"a":{"command":"/usr/bin/python3","tier":"host",}}}'));
    expect(comma).toMatch(/bad\.json:1:73: a trailing comma before "}": remove it; /);
    expect(comma).toMatch(strict);
    expect(failure(file('comment.json', '{\n  // the fleet\n  "version": 1, "servers": {}\n}\n'))).toMatch(/comment\.json:2:3: expected a "double-quoted" key, found a comment; a \.json file/);
    expect(failure(file('bare.json', '{"version": 1, servers: {}}'))).toMatch(/bare\.json:1:16: expected a "double-quoted" key, found "servers:"/);
    expect(failure(file('two.json', '{"version": 1, "servers": {}}\n{}\n'))).toMatch(/two\.json:2:1: unexpected "{}" after the document's end/);
    expect(failure(file('UPPER.JSON', '{"version": 1, "servers": {},}'))).toMatch(/UPPER\.JSON:1:30: a trailing comma before "}"/);
    // A duplicate key is refused, not last-wins as JSON.parse would have it: here the second server would silently replace the first.
    expect(failure(file('dupserver.json', '{"version": 1, "servers": {\n  "a": {"command": "x"},\n  "a": {"command": "y"}\n}}'))).toMatch(/dupserver\.json:3:3: key "a" appears twice in one object; keys must be unique: remove or rename one/);
    expect(failure(file('deep.json', `{"version": 1, "servers": {}, "x": ${'['.repeat(200)}${']'.repeat(200)}}`))).toMatch(/deep\.json:1:\d+: nested deeper than 128 levels; flatten the file/);
    expect(failure(file('blank.json', '\n'))).toMatch(/blank\.json: the file is empty/);
    // Problems in the shape still name the line and column in a JSON file.
    const shape = failure(file('shape.json', '{\n  "version": 1,\n  "servers": {\n    "a": { "command": "x", "tier": "cloud", "sesion": "shared" }\n  }\n}\n'));
    expect(shape).toMatch(/shape\.json:4:36: servers\.a\.tier: Invalid option/);
    expect(shape).toMatch(/shape\.json:4:45: servers\.a: Unrecognized key: "sesion"/);
    // YAML stays YAML: the same text in a .yaml file is read as before.
    expect(loadServersFile(file('comma.yaml', '{"version":1,"servers":{"a":{"command":"/usr/bin/python3","tier":"host",}}}'), noEnv).servers.map((s) => s.name)).toEqual(['a']);
  });

  it('names the file:line:col and path of every problem in the shape', () => {
    const path = file(
      'bad.yaml',
      [
        'version: 1', // 1
        'servers:', // 2
        '  both:', // 3
        '    command: npx', // 4
        '    url: https://x.example/mcp', // 5
        '  neither:', // 6
        '    args: [a]', // 7
        '  http:', // 8
        '    url: https://x.example/mcp', // 9
        '    cwd: /tmp', // 10
        '    env: { A: b }', // 11
        '  stdio:', // 12
        '    command: npx', // 13
        '    headers: { Authorization: x }', // 14
        '    tier: platform', // 15
        '    pool: github', // 16
        '  hosted:', // 17
        '    command: npx', // 18
        '    filesystem: { read: [/] }', // 19
        '    instances: { min: 3, max: 2 }', // 20
        '    restartBackoff: { initialMs: 10, maxMs: 5 }', // 21
        '    sesion: shared', // 22
        '  values:', // 23
        '    command: npx', // 24
        '    env: { 1BAD: x, GOOD: 5, ALSO: { fromEnvv: X } }', // 25
        '  web:', // 26
        '    url: ftp://x.example/mcp', // 27
        '    headers: { Content-Type: text/plain, "bad header": x }', // 28
        '    session: sometimes', // 29
        '    callsPerInstance: 0', // 30
        '    tier: cloud', // 31
        '',
      ].join('\n'),
    );
    const message = failure(path);
    const at = (line: number, col: number, where: string, what: RegExp | string): RegExp =>
      new RegExp(`bad\\.yaml:${line}:${col}: ${where.replace(/\./g, '\\.')}: ${typeof what === 'string' ? what : what.source}`);
    expect(message).toMatch(at(5, 10, 'servers.both.url', 'a server is reached by `command` \\(stdio\\) or `url`'));
    expect(message).toMatch(at(7, 5, 'servers.neither', 'give `command` \\(a stdio server\\) or `url`'));
    expect(message).toMatch(at(10, 10, 'servers.http.cwd', '`cwd` is for stdio servers'));
    expect(message).toMatch(at(11, 10, 'servers.http.env', '`env` is for stdio servers'));
    expect(message).toMatch(at(14, 14, 'servers.stdio.headers', '`headers` is for Streamable HTTP servers'));
    expect(message).toMatch(at(16, 11, 'servers.stdio.pool', 'only host-tier servers run on named worker pools'));
    expect(message).toMatch(at(19, 17, 'servers.hosted.filesystem', 'host-tier servers get no private filesystem view'));
    expect(message).toMatch(at(20, 23, 'servers.hosted.instances.min', /min \(3\) is above max \(2\)/));
    expect(message).toMatch(at(21, 34, 'servers.hosted.restartBackoff.initialMs', /initialMs \(10\) is above maxMs \(5\)/));
    expect(message).toMatch(/bad\.yaml:22:5: servers\.hosted: Unrecognized key: "sesion"; did you mean "session"\?/);
    expect(message).toMatch(at(25, 12, 'servers.values.env.1BAD', 'key must be letters, digits and "_"'));
    expect(message).toMatch(at(25, 27, 'servers.values.env.GOOD', 'must be a string, \\{ fromEnv: NAME \\} or \\{ fromFile: PATH \\}'));
    expect(message).toMatch(at(25, 36, 'servers.values.env.ALSO', 'must be a string'));
    expect(message).toMatch(at(27, 10, 'servers.web.url', 'must be an http:// or https:// URL'));
    expect(message).toMatch(at(28, 16, 'servers.web.headers.Content-Type', 'key "Content-Type" is set by the MCP transport itself'));
    expect(message).toMatch(at(28, 42, 'servers.web.headers.bad header', 'key must be an HTTP header name'));
    expect(message).toMatch(/bad\.yaml:29:14: servers\.web\.session: Invalid option.*; write one of "shared", "perCaller"/);
    expect(message).toMatch(/bad\.yaml:30:23: servers\.web\.callsPerInstance: Too small/);
    expect(message).toMatch(/bad\.yaml:31:11: servers\.web\.tier: Invalid option/);
  });

  it('names the line of syntax errors, duplicate keys, a wrong version, and an unreadable file', () => {
    expect(failure(file('syntax.yaml', 'version: 1\nservers: [unclosed\n'))).toMatch(/syntax\.yaml:\d+:\d+: /);
    expect(failure(file('dup.yaml', 'version: 1\nservers:\n  a: { command: x }\n  a: { command: y }\n'))).toMatch(/dup\.yaml:4:3: key "a" appears twice in one map; keys must be unique: remove or rename one/);
    expect(failure(file('dup.json', '{"version": 1, "servers": {}, "version": 1}'))).toMatch(/dup\.json:1:31: key "version" appears twice in one object; keys must be unique/);
    expect(failure(file('v2.yaml', 'version: 2\nservers: {}\n'))).toMatch(/v2\.yaml:1:10: version: Invalid input: expected 1; write 1/);
    // What to change, after the validator's words: the field a misspelt key was likely meant to be, what is missing.
    expect(failure(file('typo.yaml', 'version: 1\nservers:\n  a:\n    command: x\n    instance: { max: 2 }\n'))).toMatch(/typo\.yaml:5:5: servers\.a: Unrecognized key: "instance"; did you mean "instances"\?/);
    expect(failure(file('stray.yaml', 'version: 1\nservers:\n  a:\n    command: x\n    colour: red\n'))).toMatch(/stray\.yaml:5:5: servers\.a: Unrecognized key: "colour"; remove "colour": it is not a field here/);
    expect(failure(file('noservers.yaml', 'version: 1\n'))).toMatch(/noservers\.yaml:1:1: servers: Invalid input: expected record, received undefined; add it/);
    expect(failure(file('empty.yaml', ''))).toMatch(/empty\.yaml: the file is empty; it needs `version: 1` and a `servers` map/);
    expect(failure(file('comments.yaml', '# nothing yet\n'))).toMatch(/comments\.yaml: the file is empty/);
    expect(failure(file('scalar.yaml', 'servers\n'))).toMatch(/scalar\.yaml:1:1: \(root\): Invalid input: expected object, received string/);
    expect(failure(join(dir, 'missing.yaml'))).toMatch(/--mcp: cannot read .*missing\.yaml: ENOENT; give --mcp the path of a servers file the worker can read$/);
    // A key JavaScript objects drop (it sets the prototype) is refused where it is, not lost: a server, an env name, a tool.
    const proto = failure(file('proto.yaml', 'version: 1\nservers:\n  __proto__: { command: x }\n  b:\n    command: y\n    env: { __proto__: v }\n    tools:\n      __proto__: { retryable: true }\n'));
    expect(proto).toMatch(/proto\.yaml:3:3: servers\.__proto__: `__proto__` cannot be a name/);
    expect(proto).toMatch(/proto\.yaml:6:12: servers\.b\.env\.__proto__: /);
    expect(proto).toMatch(/proto\.yaml:8:7: servers\.b\.tools\.__proto__: /);
    expect(failure(file('proto.json', '{"version": 1, "servers": {"__proto__": {"command": "x"}}}'))).toMatch(/proto\.json:1:28: servers\.__proto__: /);
    // Aliases of aliases expand exponentially ("billion laughs"): the parser's limit is a CONFIG_INVALID naming the file's first alias.
    expect(failure(file('laughs.yaml', 'version: 1\na: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: [*d, *d, *d, *d, *d, *d, *d, *d, *d]\n'))).toMatch(/laughs\.yaml:3:8: the file expands its aliases \(\*name\) too often/);
    const creds = failure(file('creds.yaml', 'version: 1\nservers:\n  h: { url: "https://me:hunter2@x.example/mcp" }\n'));
    expect(creds).toMatch(/creds\.yaml:3:13: servers\.h\.url: a URL must not carry credentials/);
    expect(creds).not.toContain('hunter2');
  });

  it('says what to change in words of the file, never only the parser\'s or the validator\'s (found by QA)', () => {
    // "did you mean" names only a field of the object the key sits in, and only a likely slip of the keyboard.
    expect(failure(file('top.yaml', 'version: 1\nx: 1\nservers: {}\n'))).toMatch(/top\.yaml:2:1: \(root\): Unrecognized key: "x"; remove "x": it is not a field here$/);
    expect(failure(file('mix.yaml', 'version: 1\nservers:\n  a:\n    command: x\n    mix: 2\n'))).toMatch(/mix\.yaml:5:5: servers\.a: Unrecognized key: "mix"; remove "mix": it is not a field here$/);
    expect(failure(file('mixin.yaml', 'version: 1\nservers:\n  a:\n    command: x\n    instances: { mix: 2 }\n'))).toMatch(/mixin\.yaml:5:18: servers\.a\.instances: Unrecognized key: "mix"; did you mean "min"\?$/);
    expect(failure(file('space.yaml', 'version: 1\nservers:\n  a: { command: x, instances: {max:2} }\n'))).toMatch(/space\.yaml:3:32: servers\.a\.instances: Unrecognized key: "max:2"; write "max: 2", with a space after ":"$/);
    // Two YAML documents: what the file holds and what to do, not the parser's API.
    const two = failure(file('two.yaml', 'version: 1\nservers:\n  a: { command: x }\n---\nversion: 1\n'));
    expect(two).toMatch(/two\.yaml:4:1: the file holds more than one YAML document, a second one starting here; keep one: remove this "---" line and the document after it/);
    expect(two).not.toMatch(/parseAllDocuments/);
    // The parser's words, each with what to change.
    expect(failure(file('tab.yaml', 'version: 1\nservers:\n\ta: { command: x }\n'))).toMatch(/tab\.yaml:3:1: Tabs are not allowed as indentation; indent with spaces$/);
    expect(failure(file('indent.yaml', 'version: 1\nservers:\n  a:\n    command: x\n   args: []\n'))).toMatch(/indent\.yaml:5:1: All mapping items must start at the same column; indent with spaces so that the keys of one map/);
    expect(failure(file('quote.yaml', 'version: 1\nservers:\n  a: { command: "x }\n'))).toMatch(/quote\.yaml:4:1: Missing closing "quote; close the string opened with " before this point/);
    expect(failure(file('escape.yaml', 'version: 1\nservers:\n  a: { command: "C:\\tools\\x" }\n'))).toMatch(/escape\.yaml:3:26: Invalid escape sequence \\x"; in "double quotes" a backslash starts an escape .*: write \\\\ for a backslash, or use single quotes$/);
    expect(failure(file('alias.yaml', 'version: 1\nservers:\n  a: *nope\n'))).toMatch(/alias\.yaml:3:6: the alias \*nope names no anchor before it; put &nope on a value above it, or write the value out$/);
    // The validator's words, each with what to change.
    expect(failure(file('list.yaml', 'version: 1\nservers:\n  - command: x\n'))).toMatch(/list\.yaml:3:3: servers: Invalid input: expected record, received array; write a map \(key: value\) here$/);
    expect(failure(file('bare.yaml', 'version: 1\nservers:\n  a:\n'))).toMatch(/bare\.yaml:3:5: servers\.a: Invalid input: expected object, received null; write a map \(key: value\) here$/);
    expect(failure(file('args.yaml', 'version: 1\nservers:\n  a: { command: x, args: -y }\n'))).toMatch(/servers\.a\.args: Invalid input: expected array, received string; write a list \(\[a, b\]\) here$/);
    expect(failure(file('yes.yaml', 'version: 1\nservers:\n  a: { command: x, tools: { t: { retryable: "yes" } } }\n'))).toMatch(/servers\.a\.tools\.t\.retryable: Invalid input: expected boolean, received string; write true or false$/);
    const bounds = failure(file('bounds.yaml', 'version: 1\nservers:\n  a: { command: "", instances: { min: -1, max: 1.5 }, tools: { t: { timeoutMs: 999999999999 } } }\n'));
    expect(bounds).toMatch(/servers\.a\.command: Too small: expected string to have >=1 characters; write at least 1 character/);
    expect(bounds).toMatch(/servers\.a\.instances\.min: Too small: expected number to be >=0; write 0 or more/);
    expect(bounds).toMatch(/servers\.a\.instances\.max: Invalid input: expected int, received number; write a whole number/);
    expect(bounds).toMatch(/servers\.a\.tools\.t\.timeoutMs: Too big: expected number to be <=86400000; write 86400000 or less/);
    // The file's own rules, each with what to change.
    const rules = failure(file('rules.yaml', 'version: 1\nservers:\n  a: { command: x, instances: { min: 3 }, restartBackoff: { initialMs: 10, maxMs: 5 } }\n  b: { command: y, prefix: a }\n  c: { url: "https://x.example/mcp", args: [z] }\n'));
    expect(rules).toMatch(/servers\.a\.instances\.min: min \(3\) is above max \(1, the default\); lower min, or raise instances\.max/);
    expect(rules).toMatch(/servers\.a\.restartBackoff\.initialMs: initialMs \(10\) is above maxMs \(5\); lower initialMs, or raise maxMs/);
    expect(rules).toMatch(/servers\.b\.prefix: prefix "a" is already the prefix of server "a"; give one of them another `prefix`/);
    expect(rules).toMatch(/servers\.c\.args: `args` is for stdio servers \(`command`\); remove it/);
  });

  it('checks that cwd is a directory and filesystem paths exist', () => {
    const path = file('paths.yaml', 'version: 1\nservers:\n  s:\n    command: x\n    cwd: ./nowhere\n    tier: platform\n    filesystem:\n      read: [./data, ./gone]\n      write: [./ok.json]\n');
    const message = failure(path);
    expect(message).toMatch(new RegExp(`paths\\.yaml:5:10: servers\\.s\\.cwd: ${join(dir, 'nowhere')} does not exist; create it, or fix the path`));
    expect(message).toMatch(new RegExp(`paths\\.yaml:8:22: servers\\.s\\.filesystem\\.read\\.1: ${join(dir, 'gone')} does not exist`));
    expect(message).not.toMatch(/write/);
    expect(failure(file('cwdfile.yaml', 'version: 1\nservers:\n  s: { command: x, cwd: ./ok.json }\n'))).toMatch(/cwdfile\.yaml:3:25: servers\.s\.cwd: .*ok\.json is not a directory; give a directory/);
  });

  it('refuses a filesystem path that leads elsewhere through a symlink (of its own, or of a directory above it), naming where', () => {
    mkdirSync(join(dir, 'real-data', 'sub'), { recursive: true });
    symlinkSync(join(dir, 'real-data'), join(dir, 'linked-data'));
    const message = failure(file('linked.yaml', 'version: 1\nservers:\n  s:\n    command: x\n    tier: platform\n    filesystem:\n      read: [./linked-data]\n      write: [./linked-data/sub]\n'));
    expect(message).toContain(`linked.yaml:7:14: servers.s.filesystem.read.0: ${join(dir, 'linked-data')} leads to ${join(dir, 'real-data')} through a symlink; declare ${join(dir, 'real-data')} itself`);
    expect(message).toContain(`servers.s.filesystem.write.0: ${join(dir, 'linked-data', 'sub')} leads to ${join(dir, 'real-data', 'sub')} through a symlink`);
    expect(loadServersFile(file('real.yaml', 'version: 1\nservers:\n  s:\n    command: x\n    tier: platform\n    filesystem: { read: [./real-data] }\n'), noEnv).servers[0]?.filesystem?.read).toEqual([join(dir, 'real-data')]);
  });
});

describe('prefixes', () => {
  it('must be valid names, and so must server names and the tools the file names', () => {
    const path = file(
      'prefix.yaml',
      [
        'version: 1', // 1
        'servers:', // 2
        '  a: { command: x, prefix: "a.b" }', // 3
        '  e: { command: x, tools: { "bad name": { retryable: true } } }', // 4
        '  "bad server": { command: x }', // 5
        '',
      ].join('\n'),
    );
    const message = failure(path);
    expect(message).toMatch(/prefix\.yaml:3:28: servers\.a\.prefix: must be 1-64 characters .*no "\."/);
    expect(message).toMatch(/prefix\.yaml:4:29: servers\.e\.tools\.bad name: key must be 1-128 characters of letters, digits/);
    expect(message).toMatch(/prefix\.yaml:5:3: servers\.bad server: key must be 1-64 characters .*; rename the server/);
  });

  it('says what to fix when a value is both fromEnv and fromFile, and gives one bound for a number past two', () => {
    const both = failure(file('both.yaml', 'version: 1\nservers:\n  a:\n    command: x\n    env: { TOKEN: { fromEnv: HOME, fromFile: /etc/hostname } }\n'));
    expect(both).toMatch(/servers\.a\.env\.TOKEN: must be a string, \{ fromEnv: NAME \} or \{ fromFile: PATH \}; give one of "fromEnv" or "fromFile", not both/);
    expect(both).not.toContain('did you mean');
    // A duration that becomes a timer is bounded by what a timer holds (about 24.8 days): past it, it would fire at once, for ever.
    const long = failure(file('long.yaml', 'version: 1\nservers:\n  a:\n    command: x\n    idleMs: 2592000000\n    restartBackoff: { maxMs: 3000000000 }\n    crashLoop: { windowMs: 1e12 }\n'));
    expect(long).toMatch(/servers\.a\.idleMs: Too big: expected number to be <=2147483647; write 2147483647 or less/);
    expect(long).toMatch(/servers\.a\.restartBackoff\.maxMs: Too big: .*write 2147483647 or less/);
    expect(long).toMatch(/servers\.a\.crashLoop\.windowMs: Too big: .*write 2147483647 or less/);
    const huge = failure(file('huge.yaml', 'version: 1\nservers:\n  a:\n    command: x\n    startupTimeoutMs: 1e300\n'));
    expect(huge).toMatch(/servers\.a\.startupTimeoutMs: Too big: expected number to be <=600000; write 600000 or less/);
    expect(huge).not.toContain('9007199254740991');
  });

  it('default to the server name and must leave unique tool names of at most 128 characters', () => {
    const long = 'p'.repeat(64);
    const path = file(
      'collide.yaml',
      [
        'version: 1', // 1
        'servers:', // 2
        '  b: { command: x, prefix: shared }', // 3
        '  c: { command: x, prefix: shared }', // 4
        '  shared: { command: x }', // 5
        `  d: { command: x, prefix: ${long}, tools: { ${'t'.repeat(64)}: { retryable: true }, ${'t'.repeat(63)}: {} } }`, // 6
        '',
      ].join('\n'),
    );
    const message = failure(path);
    expect(message).toMatch(/collide\.yaml:4:28: servers\.c\.prefix: prefix "shared" is already the prefix of server "b"/);
    expect(message).toMatch(/collide\.yaml:5:11: servers\.shared: prefix "shared" is already the prefix of server "b"/);
    expect(message).toMatch(/collide\.yaml:6:\d+: servers\.d\.tools\.t{64}: "p{64}\.t{64}" is 129 characters; tool names are at most 128 \(shorten the prefix\)/);
    expect(message).not.toMatch(/tools\.t{63}:/);
    const ok = loadServersFile(file('prefix-ok.yaml', 'version: 1\nservers:\n  gh: { command: x }\n  gh-2: { command: x, prefix: gh_two }\n'), noEnv);
    expect(ok.servers.map((s) => s.prefix)).toEqual(['gh', 'gh_two']);
  });

  it('name imported tools prefix.tool, or say why a name cannot be offered', () => {
    expect(prefixedToolName('gh', 'create_issue')).toEqual({ ok: true, name: 'gh.create_issue' });
    expect(prefixedToolName('gh', 'a.b-c')).toEqual({ ok: true, name: 'gh.a.b-c' });
    expect(prefixedToolName('gh', 'café')).toEqual({ ok: false, reason: expect.stringMatching(/tool "café" must be 1-128 characters/) as string });
    expect(prefixedToolName('gh', '')).toMatchObject({ ok: false });
    expect(prefixedToolName('gh', 'x'.repeat(126))).toMatchObject({ ok: false, reason: expect.stringMatching(/129 characters/) as string });
  });
});

describe('values from the environment and files', () => {
  const token = 'tok-5f1c9e-never-shown';
  const secretFile = file('token.txt', `${token}\n`);

  it('are taken at load and shown only by where they came from', () => {
    const path = file(
      'secrets.yaml',
      [
        'version: 1',
        'servers:',
        '  s:',
        '    command: x',
        '    env: { PATH: { fromEnv: PATH }, TOKEN: { fromFile: ./token.txt }, PLAIN: literal }',
        '  h:',
        '    url: http://127.0.0.1:1/mcp',
        `    headers: { Authorization: { fromFile: ${secretFile} }, X-Key: { fromEnv: API_KEY } }`,
        '',
      ].join('\n'),
    );
    const [s, h] = loadServersFile(path, { PATH: '/usr/bin:/bin', API_KEY: token }).servers;
    const env = (s!.transport as StdioTransport).env;
    const headers = (h!.transport as HttpTransport).headers;
    // One trailing newline is dropped from a file.
    expect(revealAll(env)).toEqual({ PATH: '/usr/bin:/bin', TOKEN: token, PLAIN: 'literal' });
    expect(revealAll(headers)).toEqual({ Authorization: token, 'X-Key': token });
    expect(env['TOKEN']).toBeInstanceOf(SecretValue);
    expect((env['TOKEN'] as SecretValue).source).toBe(`file ${secretFile}`);
    for (const shown of [JSON.stringify([s, h]), inspect([s, h], { depth: 10 }), String(headers['X-Key']), `${String(env['PATH'])}`]) expect(shown).not.toContain(token);
    expect(JSON.stringify(headers)).toBe(`{"Authorization":"[secret from file ${secretFile}]","X-Key":"[secret from environment variable API_KEY]"}`);
  });

  it('that are missing or unusable are named, never shown', () => {
    const nl = file('newline.txt', `${token}\nsecond line\n`);
    const path = file(
      'missing.yaml',
      [
        'version: 1', // 1
        'servers:', // 2
        '  s:', // 3
        '    command: x', // 4
        '    env:', // 5
        '      TOKEN: { fromEnv: GITHUB_TOKEN }', // 6
        '      KEY: { fromFile: ./no-such-secret }', // 7
        '      NUL: { fromEnv: WITH_NUL }', // 8
        '  h:', // 9
        '    url: https://x.example/mcp', // 10
        '    headers:', // 11
        '      Authorization: { fromFile: ./newline.txt }', // 12
        '      X-Key: { fromEnv: MULTI }', // 13
        '',
      ].join('\n'),
    );
    const message = failure(path, { MULTI: `${token}\r\nX-Evil: 1`, WITH_NUL: `${token}\0` });
    expect(message).toMatch(/missing\.yaml:6:14: servers\.s\.env\.TOKEN: environment variable GITHUB_TOKEN is not set in the worker's environment; set it where the worker starts/);
    expect(message).toMatch(new RegExp(`missing\\.yaml:7:12: servers\\.s\\.env\\.KEY: cannot read file ${join(dir, 'no-such-secret')}: ENOENT; fix \`fromFile\``));
    expect(message).toMatch(/missing\.yaml:8:12: servers\.s\.env\.NUL: the value from environment variable WITH_NUL contains a NUL character, which an environment cannot carry; remove it there/);
    expect(message).toMatch(new RegExp(`missing\\.yaml:12:22: servers\\.h\\.headers\\.Authorization: the value from file ${nl} contains a line break or NUL`));
    expect(message).toMatch(/missing\.yaml:13:14: servers\.h\.headers\.X-Key: the value from environment variable MULTI contains a line break or NUL/);
    expect(message).not.toContain(token);
    expect(message).not.toContain('X-Evil');
  });
  it('refuses a fromFile that is no regular file (a FIFO would hold the start for ever, a device never end) or is too large', () => {
    const fifo = join(dir, 'secret.fifo');
    execFileSync('mkfifo', [fifo]);
    file('huge.txt', 'x'.repeat(1024 * 1024 + 1));
    const path = file('special.yaml', ['version: 1', 'servers:', '  s:', '    command: x', '    env:', '      A: { fromFile: ./secret.fifo }', '      B: { fromFile: /dev/zero }', '      C: { fromFile: ./huge.txt }', '      D: { fromFile: ./data }', ''].join('\n'));
    const message = failure(path);
    expect(message).toMatch(new RegExp(`special\\.yaml:6:10: servers\\.s\\.env\\.A: ${fifo} is not a regular file`));
    expect(message).toMatch(/special\.yaml:7:10: servers\.s\.env\.B: \/dev\/zero is not a regular file/);
    expect(message).toMatch(/special\.yaml:8:10: servers\.s\.env\.C: .*huge\.txt is 1048577 bytes; a value from a file may be at most 1048576/);
    expect(message).toMatch(/special\.yaml:9:10: servers\.s\.env\.D: .*data is not a regular file/);
  });

  it('refuses a command or argument no command line can carry: a NUL, or more than the kernel takes in one argument or environment entry', () => {
    const path = file('argv.yaml', ['version: 1', 'servers:', '  s:', '    command: "x\\0y"', '    args: [ok, "a\\0b", ' + JSON.stringify('z'.repeat(200_000)) + ']', ''].join('\n'));
    const message = failure(path);
    expect(message).toMatch(/argv\.yaml:4:14: servers\.s\.command: contains a NUL character, which a command line cannot carry; remove it/);
    expect(message).toMatch(/argv\.yaml:5:16: servers\.s\.args\.1: contains a NUL character/);
    expect(message).toMatch(/servers\.s\.args\.2: is 200000 bytes, over the 131071 one argument may be/);
    // An environment entry is checked once the file's shape is right.
    const env = failure(file('env.yaml', ['version: 1', 'servers:', '  s:', '    command: x', '    env:', '      BIG: ' + JSON.stringify('v'.repeat(200_000)), ''].join('\n')));
    expect(env).toMatch(/env\.yaml:6:12: servers\.s\.env\.BIG: the value makes an environment entry of 200004 bytes, over the 131071 one may be/);
  });
  it("accepts a host server's filesystem when one of its tools runs sandboxed (its instances there need their view), and gives it to them", () => {
    const path = file('mixed.yaml', ['version: 1', 'servers:', '  h:', '    command: /usr/bin/python3', `    args: [${join(dir, 'data', 'server.py')}]`, `    filesystem: { read: [${join(dir, 'data')}] }`, '    tools:', '      pid: { tier: platform }', ''].join('\n'));
    const [server] = loadServersFile(path, noEnv).servers;
    expect(server).toMatchObject({ tier: 'host', filesystem: { read: [join(dir, 'data')], write: [] } });
    expect(poolOptionsOf(server!, { sandbox: true })).toMatchObject({ launch: { sandbox: { read: [join(dir, 'data')] } } });
  });
  it("takes only the values of the servers the loading worker runs: another lane's missing secret is not its reason to stop", () => {
    const path = file('lanes.yaml', ['version: 1', 'servers:', '  h: { command: x, tier: host }', '  p:', '    command: x', '    tier: platform', '    env: { KEY: { fromEnv: PLATFORM_ONLY_KEY } }', ''].join('\n'));
    expect(loadServersFile(path, noEnv, { tier: 'host', pool: undefined }).servers.map((s) => s.name)).toEqual(['h', 'p']);
    expect(failure(path)).toMatch(/lanes\.yaml:7:17: servers\.p\.env\.KEY: environment variable PLATFORM_ONLY_KEY is not set/);
    expect(() => loadServersFile(path, noEnv, { tier: 'platform', pool: undefined })).toThrow(/PLATFORM_ONLY_KEY is not set/);
    const [, p] = loadServersFile(path, { PLATFORM_ONLY_KEY: 'k3y-value' }, { tier: 'platform', pool: undefined }).servers;
    expect(revealAll((p!.transport as StdioTransport).env)).toEqual({ KEY: 'k3y-value' });
  });
});
