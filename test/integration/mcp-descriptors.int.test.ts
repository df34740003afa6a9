import { closeSync, mkdtempSync, openSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FleetClient } from '@forge-fleet/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { type ProcessEntry, processTable } from '../../apps/worker/test/fixtures/proc-table.js';
import { ROOT } from '../fixtures/fleet.js';
import { fleetPerTest } from '../fixtures/fleet-per-test.js';
import { until } from '../fixtures/wait.js';

const NODE_MODULES = join(ROOT, 'node_modules');
const WORKER_FIXTURES = join(ROOT, 'apps', 'worker', 'test', 'fixtures');
const PROBE_SERVER = join(WORKER_FIXTURES, 'sandbox-mcp-probe-server.mjs');
const DESCRIPTOR_TOOLS = join(ROOT, 'test', 'fixtures', 'descriptor-tools.ts');

/**
 * Where the worker gets the two descriptors, as QA's `npm start 200</ 201</tmp/secret.txt` gave them: above the
 * 0–15 that Node itself marks close-on-exec at start (libuv's uv_disable_stdio_inheritance), so only the worker can
 * keep them from its children.
 */
const DIRECTORY_FD = 200;
const SECRET_FD = 201;

/** One descriptor a process holds, by what it refers to. */
interface Held {
  readonly fd: number;
  readonly dev: number;
  readonly ino: number;
}

/** One descriptor of a process of the worker's tree, seen from the host. */
interface HeldBy extends Held {
  readonly pid: number;
  readonly comm: string;
}

/**
 * Every process below `worker` (children, their children…) outside the
 * worker's session: what the worker starts to run others' code (servers,
 * sandboxes) or to watch it (reapers) each gets a session of its own, and
 * keeps it for everything below. Left in the worker's session: the
 * `esbuild --service` that `--import tsx` (how the tests start apps from
 * source) spawns to compile main.ts before any code of the worker runs, and
 * so before it can close anything; a built worker has no such child.
 */
function startedBy(worker: number): ProcessEntry[] {
  const table = processTable();
  const session = table.find((p) => p.pid === worker)?.session;
  const found: ProcessEntry[] = [];
  const queue = [worker];
  for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
    for (const child of table.filter((p) => p.ppid === next)) {
      if (child.session !== session) found.push(child);
      queue.push(child.pid);
    }
  }
  return found;
}

/** What each descriptor above stdio of `procs` refers to (stat through /proc/<pid>/fd, as root on the host sees it). */
function heldBy(procs: readonly ProcessEntry[]): HeldBy[] {
  const held: HeldBy[] = [];
  for (const { pid, comm } of procs) {
    let fds: string[];
    try {
      fds = readdirSync(`/proc/${pid}/fd`);
    } catch {
      continue; // ended meanwhile
    }
    for (const name of fds) {
      const fd = Number(name);
      if (fd < 3) continue;
      try {
        const s = statSync(`/proc/${pid}/fd/${name}`);
        held.push({ pid, comm, fd, dev: s.dev, ino: s.ino });
      } catch {
        // closed meanwhile
      }
    }
  }
  return held;
}

/** The text of an MCP tool's result, as the fleet client hands it over. */
function textOf(content: unknown): string {
  if (typeof content !== 'string') throw new Error(`expected text content, got ${JSON.stringify(content)}`);
  return content;
}

/**
 * QA's finding: every descriptor the worker inherited without close-on-exec
 * was passed on to every process it spawned — libuv closes none in a child —
 * sandboxes included. A Platform-tier MCP server read a secret file through
 * one and, through an inherited directory, opened the host's files with
 * openat(), outside its filesystem view. The attack, through a real worker
 * started with two such descriptors: the worker may keep nothing of them for
 * what it starts (sandboxed servers, host servers and their reapers, sandbox
 * processes of tool handlers).
 */
describe('descriptors a worker inherits without close-on-exec', () => {
  const t = fleetPerTest();
  let base: string;
  let secret: string;
  /** The test's own descriptors of the directory and the secret, handed to the workers at DIRECTORY_FD and SECRET_FD. */
  let directoryFd: number;
  let secretFd: number;

  beforeAll(() => {
    base = mkdtempSync(join(tmpdir(), 'forge-fds-'));
    secret = join(base, 'secret.txt');
    writeFileSync(secret, 'the host secret');
    directoryFd = openSync(base, 'r');
    secretFd = openSync(secret, 'r');
  });

  afterAll(() => {
    closeSync(directoryFd);
    closeSync(secretFd);
    rmSync(base, { recursive: true, force: true });
  });

  /** Those of `held` that refer to the secret file or its directory. */
  function leaks<T extends Held>(held: readonly T[]): T[] {
    const targets = [statSync(base), statSync(secret)];
    return held.filter((h) => targets.some((s) => s.dev === h.dev && s.ino === h.ino));
  }

  it('reach no process the worker starts: sandboxed and host MCP servers, their reapers, sandboxed tool handlers', async () => {
    const server = { command: process.execPath, args: [PROBE_SERVER], env: { PATH: '/usr/bin:/bin' } };
    const file = join(base, 'servers.yaml');
    writeFileSync(
      file,
      stringify({
        version: 1,
        servers: {
          boxed: { ...server, tier: 'platform', filesystem: { read: [NODE_MODULES, WORKER_FIXTURES] } },
          bare: { ...server, tier: 'host' },
        },
      }),
    );
    const inherited = { [DIRECTORY_FD]: directoryFd, [SECRET_FD]: secretFd };
    const [platform, host] = await Promise.all([
      t.fleet.worker({ tier: 'platform', tools: DESCRIPTOR_TOOLS, mcp: file, inherited, env: { FORGE_SANDBOX: 'on', FORGE_SANDBOX_SIZE: '1' } }),
      t.fleet.worker({ tier: 'host', tools: false, mcp: file, inherited }),
    ]);
    const { url } = await t.fleet.dispatcher({ FORGE_APPROVAL: 'auto' });
    t.client = new FleetClient({ url });
    const client = t.client;
    await until('boxed.fds, bare.fds and descriptors in the catalog', async () => {
      const { tools } = (await (await fetch(`${url}/v1/tools`)).json()) as { tools: { name: string }[] };
      return ['boxed.fds', 'bare.fds', 'descriptors'].every((name) => tools.some((tool) => tool.name === name));
    });

    // As each process sees itself: the attacker's view.
    const boxed = JSON.parse(textOf((await client.call('boxed.fds', {}, { timeoutMs: 20_000 })).content)) as Held[];
    const bare = JSON.parse(textOf((await client.call('bare.fds', {}, { timeoutMs: 20_000 })).content)) as Held[];
    const handler = (await client.call('descriptors', {}, { timeoutMs: 20_000 })).structuredContent as { held: Held[] };
    expect({ boxed: leaks(boxed), bare: leaks(bare), handler: leaks(handler.held) }).toEqual({ boxed: [], bare: [], handler: [] });

    // As the host sees each process the workers started and what runs below it: bubblewrap, servers, reapers, sandboxes.
    const started = [...startedBy(platform.pid), ...startedBy(host.pid)];
    expect(started.map((p) => p.comm)).toEqual(expect.arrayContaining(['bwrap', 'node', 'sh']));
    expect(leaks(heldBy(started))).toEqual([]);
  }, 60_000);
});
