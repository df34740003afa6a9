import { readdirSync, renameSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { connect, createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { FleetClient } from '@forge-fleet/client';
import { freePort } from '@forge-fleet/local-redis';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { fleetPerTest } from '../fixtures/fleet-per-test.js';
import { McpTestDir } from '../fixtures/mcp/servers-files.js';
import { until } from '../fixtures/wait.js';

/**
 * Attacks of one sandboxed (Platform-tier) MCP server on what it must not
 * reach: another server's declared paths, turned into symlinks to anywhere on
 * the host, and host services listening on Unix sockets inside its own
 * read-only paths. Each server here is a small Node stdio server that does
 * what its caller asks with the filesystem and sockets of its view.
 */

/**
 * The hostile server: `read`, `swap` (a directory for a symlink to `target`), `connect` (a Unix socket), `exit`,
 * `writable` (the files under a directory it could write, the processes' own under /proc left out).
 */
const HOSTILE = String.raw`
const fs = require('node:fs');
const net = require('node:net');
const send = (m) => process.stdout.write(JSON.stringify({ jsonrpc: '2.0', ...m }) + '\n');
const text = (id, t, isError = false) => send({ id, result: { content: [{ type: 'text', text: String(t) }], isError } });
const tools = ['read', 'swap', 'connect', 'exit', 'writable', 'setid', 'userns'].map((name) => ({ name, inputSchema: { type: 'object' } }));
require('node:readline').createInterface({ input: process.stdin }).on('line', (line) => {
  const m = JSON.parse(line);
  const a = m.params?.arguments ?? {};
  if (m.method === 'initialize') send({ id: m.id, result: { protocolVersion: m.params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: 'hostile', version: '1' } } });
  else if (m.method === 'tools/list') send({ id: m.id, result: { tools } });
  else if (m.method === 'tools/call') {
    try {
      if (m.params.name === 'read') text(m.id, fs.readFileSync(a.path, 'utf8'));
      else if (m.params.name === 'swap') { fs.renameSync(a.path, a.path + '.orig'); fs.symlinkSync(a.target, a.path); text(m.id, 'swapped'); }
      else if (m.params.name === 'connect') {
        const socket = net.connect(a.path);
        socket.once('data', (d) => { text(m.id, 'connected: ' + d); socket.destroy(); });
        socket.once('error', (e) => text(m.id, 'refused: ' + e.code, true));
      } else if (m.params.name === 'exit') process.exit(1);
      else if (m.params.name === 'setid') {
        // A root-owned program made set-user-ID where the host can run it: by chmod, and by creating it so.
        const tried = [];
        const copy = a.dir + '/sh-copy';
        fs.copyFileSync('/usr/bin/dash', copy);
        try { fs.chmodSync(copy, 0o4755); tried.push('chmod ok'); } catch (e) { tried.push('chmod ' + e.code); }
        try { fs.closeSync(fs.openSync(a.dir + '/made', 'w', 0o6755)); tried.push('open ' + (fs.statSync(a.dir + '/made').mode & 0o6000 ? 'setid' : 'plain')); } catch (e) { tried.push('open ' + e.code); }
        text(m.id, tried.join(', '));
      } else if (m.params.name === 'userns') {
        const r = require('node:child_process').spawnSync('/usr/bin/unshare', ['--user', '/bin/true']);
        text(m.id, r.status === 0 ? 'made one' : 'refused');
      }
      else if (m.params.name === 'writable') {
        // Every file under a.path the kernel would let this process write (no write is made): one per line.
        const found = [];
        const walk = (dir, depth) => {
          let names = [];
          try { names = fs.readdirSync(dir); } catch { return; }
          for (const name of names) {
            if (depth === 0 && (/^[0-9]+$/.test(name) || name === 'self' || name === 'thread-self')) continue;
            const path = dir + '/' + name;
            let st;
            try { st = fs.lstatSync(path); } catch { continue; }
            if (st.isDirectory()) { if (depth < 6) walk(path, depth + 1); }
            else if (st.isFile()) { try { fs.accessSync(path, fs.constants.W_OK); found.push(path); } catch {} }
          }
        };
        walk(a.path, 0);
        text(m.id, found.join('\n'));
      }
    } catch (e) { text(m.id, 'failed: ' + e.code, true); }
  } else if (m.id !== undefined) send({ id: m.id, result: {} });
});
`;

describe('a sandboxed MCP server attacking what lies outside its view', () => {
  const t = fleetPerTest();
  let mcp: McpTestDir;
  let script: string;
  let listener: Server | undefined;

  beforeEach(() => {
    mcp = new McpTestDir('mcp-escape');
    script = join(mcp.mkdir('code'), 'hostile.cjs');
    writeFileSync(script, HOSTILE);
  });

  afterEach(async () => {
    await new Promise((resolve) => (listener === undefined ? resolve(undefined) : listener.close(resolve)));
    listener = undefined;
    mcp.remove();
  });

  const hostile = (filesystem: { read: string[]; write?: string[] }) => ({
    command: process.execPath,
    args: [script],
    tier: 'platform',
    filesystem: { read: [join(script, '..'), ...filesystem.read], write: filesystem.write ?? [] },
    restartBackoff: { initialMs: 50, maxMs: 200 },
    crashLoop: { failures: 1000 },
  });

  it("cannot point another server's declared path at a host directory: the other server's next instance is refused, not given it", async () => {
    const shared = mcp.mkdir('shared');
    const later = mcp.mkdir('shared', 'later');
    writeFileSync(join(later, 'note.txt'), 'innocent');
    const keys = mcp.mkdir('keys');
    writeFileSync(join(keys, 'signing.secret'), 'the fleet keys');
    // `writer` may write the shared directory; `reader` reads a directory inside it.
    const servers = mcp.write({ writer: hostile({ read: [], write: [shared] }), reader: hostile({ read: [later] }) });
    const metricsPort = await freePort();
    await t.fleet.worker({ tier: 'platform', tools: false, mcp: servers, env: { FORGE_SANDBOX: 'on', FORGE_METRICS_PORT: String(metricsPort) } });
    const { url } = await t.fleet.dispatcher({ FORGE_APPROVAL: 'auto' });
    t.client = new FleetClient({ url, timeoutMs: 20_000 });
    await until('both servers in the catalog', async () => (await t.client!.tools()).filter((tool) => tool.name.endsWith('.read')).length === 2);
    expect(await t.client.call('reader.read', { path: join(later, 'note.txt') })).toMatchObject({ isError: false, content: 'innocent' });

    expect(await t.client.call('writer.swap', { path: later, target: keys })).toMatchObject({ isError: false, content: 'swapped' });
    // The reader's instance ends (any end will do: a crash, a replacement, an idle reaping); the pool starts another.
    expect((await t.client.call('reader.exit', {})).error?.code).toBe('MCP_SERVER_LOST');
    // Until the reader's next instance is refused — or answers, which is the escape this test is about.
    let readyz = '';
    const outcome = await until('the reader to be refused its swapped path, or to read through it', async () => {
      const attempt = await t.client!.call('reader.read', { path: join(later, 'signing.secret') }, { timeoutMs: 1000 }).catch((error: unknown) => error as Error);
      if (JSON.stringify(attempt, Object.getOwnPropertyNames(attempt)).includes('the fleet keys')) return 'read the keys';
      readyz = await (await fetch(`http://127.0.0.1:${metricsPort}/readyz`)).text();
      return readyz.includes('now leads to') && 'refused';
    });
    expect(outcome).toBe('refused');
    expect(readyz).toContain(`declared path ${later} now leads to ${keys}`);

    // Put back as it was, the reader is served again (a fresh instance binds the real directory).
    renameSync(later, `${later}.link`);
    renameSync(`${later}.orig`, later);
    await until('the reader to be served again', async () => {
      const result = await t.client!.call('reader.read', { path: join(later, 'note.txt') }).catch(() => undefined);
      return result?.content === 'innocent';
    });
  });

  it("without bubblewrap (unshare's namespaces), sees no process of the host in /proc: the worker's is not there", async () => {
    // A PATH with everything of /usr/bin but bwrap: the worker falls back to unshare for the namespaces.
    const bin = mcp.mkdir('bin-without-bwrap');
    for (const name of readdirSync('/usr/bin')) if (name !== 'bwrap') symlinkSync(join('/usr/bin', name), join(bin, name));
    const servers = mcp.write({ box: hostile({ read: [] }) });
    const worker = await t.fleet.worker({ tier: 'platform', tools: false, mcp: servers, env: { FORGE_SANDBOX: 'on', PATH: bin } });
    const { url } = await t.fleet.dispatcher({ FORGE_APPROVAL: 'auto' });
    t.client = new FleetClient({ url, timeoutMs: 20_000 });
    await until('box.read in the catalog', async () => (await t.client!.tools()).some((tool) => tool.name === 'box.read'));
    // The host's /proc would hold the worker's command line (it names the servers file).
    const seen = await t.client.call('box.read', { path: `/proc/${worker.pid}/cmdline` });
    expect(seen.content).not.toContain(servers);
    expect(seen).toMatchObject({ isError: true, content: 'failed: ENOENT' });
    expect(await t.client.call('box.read', { path: '/proc/1/cmdline' })).toMatchObject({ isError: false });
    // Root of its user namespace, it would be able to unmount that /proc and see the host's again: it has no capability.
    expect(await t.client.call('box.read', { path: '/proc/self/status' })).toMatchObject({ content: expect.stringMatching(/CapEff:\s+0000000000000000\nCapBnd:\s+0000000000000000/) as string });
  });

  // The fleet may run as root (it does in CI): the server is then root of its user namespace as the host's root,
  // and the kernel lets the owner of a file write it without any capability. Whatever of /proc the host's root owns
  // and may write (sysctls, among them kernel.core_pattern, which names a program the kernel runs as root) must be
  // out of its reach, with and without root.
  it("can write nothing of the host kernel's through /proc: no sysctl, no other file of /proc but its own processes'", async () => {
    const out = mcp.mkdir('out');
    writeFileSync(join(out, 'mine.txt'), 'may be written');
    const servers = mcp.write({ box: hostile({ read: [], write: [out] }) });
    await t.fleet.worker({ tier: 'platform', tools: false, mcp: servers, env: { FORGE_SANDBOX: 'on' } });
    const { url } = await t.fleet.dispatcher({ FORGE_APPROVAL: 'auto' });
    t.client = new FleetClient({ url, timeoutMs: 20_000 });
    await until('box.writable in the catalog', async () => (await t.client!.tools()).some((tool) => tool.name === 'box.writable'));
    // The walk finds what the server may write: its declared `write` path.
    expect(await t.client.call('box.writable', { path: out })).toMatchObject({ isError: false, content: join(out, 'mine.txt') });
    const proc = await t.client.call('box.writable', { path: '/proc' });
    expect(proc).toMatchObject({ isError: false, content: '' });
    expect(await t.client.call('box.read', { path: '/proc/sys/kernel/core_pattern' })).toMatchObject({ isError: false });
  });

  // Root in the sandbox is the host's root to the kernel when the fleet runs as root: a root-owned set-user-ID program
  // left in a declared `write` path would make whoever runs it on the host root. Nor may it make a user namespace of
  // its own, which would give it every capability there over files its root owns.
  it('can leave no set-user-ID or set-group-ID program on the host, and can make no user namespace of its own', async () => {
    const out = mcp.mkdir('out');
    const servers = mcp.write({ box: hostile({ read: [], write: [out] }) });
    await t.fleet.worker({ tier: 'platform', tools: false, mcp: servers, env: { FORGE_SANDBOX: 'on' } });
    const { url } = await t.fleet.dispatcher({ FORGE_APPROVAL: 'auto' });
    t.client = new FleetClient({ url, timeoutMs: 20_000 });
    await until('box.setid in the catalog', async () => (await t.client!.tools()).some((tool) => tool.name === 'box.setid'));
    const tried = await t.client.call('box.setid', { dir: out });
    expect(tried).toMatchObject({ isError: false, content: 'chmod EPERM, open EPERM' });
    for (const name of readdirSync(out)) expect(statSync(join(out, name)).mode & 0o6000, name).toBe(0);
    expect(await t.client.call('box.userns', {})).toMatchObject({ isError: false, content: 'refused' });
  });

  it('cannot connect to a host Unix socket inside its read-only paths', async () => {
    const data = mcp.mkdir('data');
    const socketPath = join(data, 'service.sock');
    listener = createServer((socket) => socket.end('hello from the host'));
    await new Promise<void>((resolve) => listener!.listen(socketPath, resolve));
    const servers = mcp.write({ box: hostile({ read: [data], write: [mcp.mkdir('out')] }) });
    await t.fleet.worker({ tier: 'platform', tools: false, mcp: servers, env: { FORGE_SANDBOX: 'on' } });
    const { url } = await t.fleet.dispatcher({ FORGE_APPROVAL: 'auto' });
    t.client = new FleetClient({ url, timeoutMs: 20_000 });
    await until('box.connect in the catalog', async () => (await t.client!.tools()).some((tool) => tool.name === 'box.connect'));
    // The host side works: the socket is live.
    const direct = await new Promise<string>((resolve, reject) => {
      const s = connect(socketPath);
      s.once('data', (d) => resolve(String(d)));
      s.once('error', reject);
    });
    expect(direct).toBe('hello from the host');
    const result = await t.client.call('box.connect', { path: socketPath });
    expect(result.content).not.toContain('hello from the host');
    expect(result).toMatchObject({ isError: true });
    expect(result.content).toMatch(/^refused: E/);
  });
});
