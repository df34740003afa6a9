import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '@forge-fleet/local-redis';
import type { QueueStatsList } from '@forge-fleet/shared';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from '../fixtures/fleet.js';
import { npmStart, type NpmStart } from '../fixtures/npm-start.js';
import { type Background, readmeBlocksOf, runShell, type ShellRun, shellCommands, startBackground, stopGroup, untilReady } from '../fixtures/readme.js';
import { redisUrl } from '../fixtures/redis.js';
import { until } from '../fixtures/wait.js';

/*
 * Issue #14: every recipe in the README runs as written. The commands are
 * read out of README.md itself, changed only by `substitutions` and `environment` below (where
 * this machine's ports, Redis and files stand in for the README's), and run
 * the way a person at a terminal runs them: from the repository, one after
 * the other, with what one `export`s seen by the next; long-running ones in
 * the background until they are ready. A README that drifts from the code
 * fails here, naming the command.
 */

const FIRST_DAY = 'Your own tools, first day';
const ACROSS = 'Running a fleet across machines';
const CLI = 'CLI';
const APPROVALS = 'Approvals by people';
const MCP_SERVERS = 'Your MCP servers on the fleet';

const [toolsModule] = readmeBlocksOf(FIRST_DAY, 'js', 1);
const [startCommands, fromRepoCommands] = readmeBlocksOf(FIRST_DAY, 'sh', 2).map(shellCommands);
const [acrossCommands] = readmeBlocksOf(ACROSS, 'sh', 1).map(shellCommands);
const [cliCommands] = readmeBlocksOf(CLI, 'sh', 1).map(shellCommands);
const [approvalsCommands] = readmeBlocksOf(APPROVALS, 'sh', 1).map(shellCommands);
/** The README's agent on the fleet's /mcp, with the official client. */
const [mcpAgent] = readmeBlocksOf('MCP', 'ts', 1);
// Its first block writes a file with a heredoc: run as one script up to its `npm start` line, which starts the fleet.
const [mcpSetup, mcpAgentCommands] = readmeBlocksOf(MCP_SERVERS, 'sh', 2);

/**
 * The tool "Approvals by people" calls (`refund` with `{ amount }`, every call
 * waiting for a person), which the README uses but does not define: a Host
 * tool of pool `payments`, the pool "Running a fleet across machines" starts a
 * worker of. `argsType`: a TypeScript annotation of its handler's argument.
 */
function refundTool(argsType = ''): string {
  return `defineTool({ name: 'refund', tier: 'host', pool: 'payments', requiresConfirmation: true,
    parameters: { type: 'object', properties: { amount: { type: 'number' } }, required: ['amount'] },
    handler: (args${argsType}) => ({ refunded: args.amount }) })`;
}

/** Where the README's names point in one test: its temp dir (files, keys, npm start's state) and its fleet's port. */
interface Places {
  readonly dir: string;
  readonly port: number;
}
const stateDirOf = (p: Places): string => join(p.dir, '.forge');

/**
 * Every change the test makes to a README command, in one place: each README
 * text on the left becomes this run's on the right, in one pass (a
 * replacement is never replaced again), and `<placeholders>` are filled from
 * what earlier commands printed (`filled`).
 */
function substitutions(p: Places): [readme: string, here: string][] {
  return [
    // The README's port: a free one (npm start and the dispatcher get it as PORT, see `environment`).
    ['127.0.0.1:8080', `127.0.0.1:${p.port}`],
    // A deployment's Redis: the test run's.
    ['redis://redis.internal:6379', redisUrl()],
    // npm start's state dir (keys, dev.json): FORGE_STATE_DIR, see `environment`.
    ['./.forge/', `${stateDirOf(p)}/`],
    ['.forge/', `${stateDirOf(p)}/`],
    // A deployment's own keys (`forge keys init --dir ./keys`).
    ['./keys', join(p.dir, 'keys')],
    // Tools modules, written by `beforeAll` into the temp dir.
    ['./my-tools.mjs', join(p.dir, 'my-tools.mjs')],
    ['./a.mjs', join(p.dir, 'a.mjs')],
    ['./b.ts', join(p.dir, 'b.ts')],
    ['./tools.js', join(p.dir, 'tools.js')],
    // The MCP servers recipe's files: its servers file beside the temp dir's node_modules, its data dir of its own.
    ['servers.yaml', join(p.dir, 'servers.yaml')],
    ['/tmp/forge-files', join(p.dir, 'forge-files')],
  ];
}

/**
 * What every command's environment gets beyond the test's own (which loses
 * REDIS_URL and FORGE_*: a developer's settings would change what the
 * recipes do): the README's 8080 is the default of npm start's and the
 * dispatcher's PORT, and `.forge/` is npm start's (and the CLI's)
 * FORGE_STATE_DIR.
 */
function environment(p: Places): Record<string, string> {
  return { PORT: String(p.port), FORGE_STATE_DIR: stateDirOf(p), FORCE_COLOR: '0' };
}

function substitute(command: string, p: Places, filled: Record<string, string> = {}): string {
  const table = new Map([...substitutions(p), ...Object.entries(filled)]);
  const escape = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const pattern = new RegExp([...table.keys()].sort((a, b) => b.length - a.length).map(escape).join('|'), 'g');
  const out = command.replace(pattern, (m) => table.get(m)!);
  const left = /<[a-z][a-z ]*>/.exec(out);
  if (left !== null) throw new Error(`the test fills no ${left[0]} in the README's \`${command}\``);
  return out;
}

/**
 * One terminal of the README's reader: runs commands from the repository,
 * keeps what they export for the next, and stops whatever it started in the
 * background (each in its own process group) on `close`.
 */
class Terminal {
  readonly vars: Record<string, string> = {};
  readonly url: string;
  readonly #started: { what: string; stop: () => Promise<void> }[] = [];

  constructor(readonly places: Places) {
    this.url = `http://127.0.0.1:${places.port}`;
  }

  env(): NodeJS.ProcessEnv {
    const env: NodeJS.ProcessEnv = { ...process.env };
    for (const name of Object.keys(env)) if (name === 'REDIS_URL' || name.startsWith('FORGE_')) delete env[name];
    return { ...env, ...environment(this.places), ...this.vars };
  }

  /** Runs a README command with `bash`; it must exit 0. */
  async run(readme: string, filled: Record<string, string> = {}): Promise<ShellRun> {
    const run = await runShell(substitute(readme, this.places, filled), this.env());
    expect(run.code, `\`${run.command}\` exited ${run.code}\nstdout: ${run.stdout}\nstderr: ${run.stderr}`).toBe(0);
    Object.assign(this.vars, run.exported);
    return run;
  }

  /** Starts a README command that keeps running (`npx forge-dispatcher`, `npx forge-worker`) in the background. */
  background(readme: string, filled: Record<string, string> = {}): Background {
    const bg = startBackground(substitute(readme, this.places, filled), this.env());
    this.#started.push({ what: readme, stop: () => bg.stop() });
    return bg;
  }

  /** Starts a README `npm start` line through the npm-start fixture, and waits until it says the fleet is up. */
  async npmStart(readme: string): Promise<NpmStart> {
    const command = substitute(readme, this.places);
    if (/['"$`\\]/.test(command)) throw new Error(`the test reads npm start lines of plain words only: ${command}`);
    const words = command.split(/\s+/);
    const at = words.findIndex((w, i) => w === 'npm' && words[i + 1] === 'start');
    const assignments = words.slice(0, at);
    const rest = words.slice(at + 2);
    if (at < 0 || !assignments.every((w) => /^[A-Z_]+=/.test(w)) || (rest.length > 0 && rest[0] !== '--')) throw new Error(`not an npm start line: ${command}`);
    const lineEnv = Object.fromEntries(assignments.map((w) => [w.slice(0, w.indexOf('=')), w.slice(w.indexOf('=') + 1)]));
    const fleet = npmStart(rest.slice(1), { ...environment(this.places), ...lineEnv });
    // Ctrl-C to the whole group, as a terminal sends it; its redis-server, dispatcher and workers are in that group.
    this.#started.push({ what: readme, stop: () => stopGroup(fleet.proc.pid!, `\`${readme}\``, 'SIGINT', 60_000) });
    const ended = (): boolean => fleet.proc.exitCode !== null || fleet.proc.signalCode !== null;
    await until(`\`${readme}\` to print "Ctrl-C stops the fleet."`, () => ended() || fleet.stdout().includes('Ctrl-C stops the fleet.'), { timeoutMs: 150_000, intervalMs: 100 });
    await fleet.ready; // rejects, with what it printed, when it exited instead
    return fleet;
  }

  /** npm start's dev.json: its URL and development tokens. */
  devFile(): { url: string; token: string; adminToken: string } {
    return JSON.parse(readFileSync(join(stateDirOf(this.places), 'dev.json'), 'utf8')) as { url: string; token: string; adminToken: string };
  }

  /** Stops everything started, last first; fails if something would not stop. */
  async close(): Promise<void> {
    const errors: unknown[] = [];
    for (const s of this.#started.reverse()) await s.stop().catch((error: unknown) => errors.push(error));
    if (errors.length > 0) throw new AggregateError(errors, `could not stop: ${errors.map(String).join('; ')}`);
  }
}

/** `commands` as the test expects the README to have them, one shape per command, in order. */
function shaped(section: string, commands: readonly string[], shapes: readonly RegExp[]): string[] {
  expect(commands.length, `README "${section}" has these commands, the test runs ${shapes.length}:\n${commands.join('\n')}`).toBe(shapes.length);
  shapes.forEach((shape, i) => expect(commands[i], `README "${section}", command ${i + 1}`).toMatch(shape));
  return [...commands];
}

/** A token's header and claims, after checking that it is a JWT signed with EdDSA. */
function claimsOf(token: string | undefined): Record<string, unknown> {
  const parts = (token ?? '').split('.');
  expect(parts, `a JWT: ${token}`).toHaveLength(3);
  expect(JSON.parse(Buffer.from(parts[0]!, 'base64url').toString())).toMatchObject({ alg: 'EdDSA', typ: 'JWT' });
  return JSON.parse(Buffer.from(parts[1]!, 'base64url').toString()) as Record<string, unknown>;
}

interface CallView {
  id: string;
  status: string;
  result?: { content: string; isError: boolean };
  error?: { code: string; message: string };
}

async function submit(url: string, token: string, name: string, args: Record<string, unknown>, waitMs = 20_000): Promise<{ status: number; body: CallView }> {
  const res = await fetch(`${url}/v1/calls?wait=${waitMs}`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` }, body: JSON.stringify({ name, arguments: args }) });
  return { status: res.status, body: (await res.json()) as CallView };
}

/** A call's view once it has ended (or after 20 s). */
async function ended(url: string, token: string, id: string): Promise<CallView> {
  return (await (await fetch(`${url}/v1/calls/${id}?wait=20000`, { headers: { authorization: `Bearer ${token}` } })).json()) as CallView;
}

async function getJson<T>(url: string, token: string): Promise<T> {
  const res = await fetch(url, { headers: { authorization: `Bearer ${token}` } });
  expect(res.status, `GET ${url}: ${await res.clone().text()}`).toBe(200);
  return (await res.json()) as T;
}

describe('README.md recipes, run as written', () => {
  const dir = mkdtempSync(join(tmpdir(), 'forge-readme-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  beforeAll(() => {
    // The README's paths are relative to the repository; the temp dir stands in for it: an ES module package
    // whose bare imports (`@forge-fleet/shared`) resolve to the repository's packages.
    writeFileSync(join(dir, 'package.json'), '{ "type": "module" }\n');
    symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir');
    // The first day's module, verbatim; FORGE_TOOLS's `./a.mjs` is that one too, its `./b.ts` the refund tool.
    writeFileSync(join(dir, 'my-tools.mjs'), toolsModule!);
    writeFileSync(join(dir, 'a.mjs'), toolsModule!);
    writeFileSync(join(dir, 'b.ts'), `import { defineTool } from '@forge-fleet/shared';\n\nexport default [\n  ${refundTool(': { amount?: unknown }')},\n];\n`);
    // `./tools.js` of the fleet across machines: the README's tools, of platform (shout) and pool payments (refund).
    writeFileSync(join(dir, 'tools.js'), `import { defineTool } from '@forge-fleet/shared';\nimport firstDay from './my-tools.mjs';\n\nexport default [\n  ...firstDay,\n  ${refundTool()},\n];\n`);
    // The bins the README runs are those `npm ci` builds (its `prepare`): build them as it does, from current sources.
    const build = spawnSync('npm', ['run', 'prepare', '--silent'], { cwd: ROOT, encoding: 'utf8', timeout: 110_000 });
    expect(build.status, `npm run prepare: ${build.stderr}`).toBe(0);
  });

  it(`${FIRST_DAY}: \`npm start -- --tools ./my-tools.mjs\`, then, from the repository, a token, a call, an approver token and one more worker of pool ops`, async () => {
    const [withExamples] = shaped(FIRST_DAY, startCommands!, [/^npm start -- --tools \S+$/, /^npm start -- .*--no-examples/, /^FORGE_TOOLS=\S+ npm start$/]);
    const [mint, call, mintApprover, worker] = shaped(FIRST_DAY, fromRepoCommands!, [
      /^export TOKEN=\$\(npx forge token mint .*--grant /,
      /^curl .*\/v1\/calls/,
      /^export APPROVER=\$\(npx forge token mint .*--role approver\)$/,
      /npx forge-worker --tier host --pool ops /,
    ]);
    const t = new Terminal({ dir, port: await freePort() });
    try {
      const fleet = await t.npmStart(withExamples!);
      // "It starts a worker for each tier and host pool a module has tools of": beside the examples' workers.
      expect(fleet.stdout()).toContain(`${join(dir, 'my-tools.mjs')}: workers for platform, host pool ops (tools: shout, ops.restart)`);
      expect(fleet.stdout()).toMatch(/examples\/tools\.ts: workers for platform, embedded, host /);

      await t.run(mint!);
      expect(claimsOf(t.vars.TOKEN)).toMatchObject({ sub: 'me', role: 'agent', grants: ['ops.*'] });
      const answer = await t.run(call!);
      expect(JSON.parse(answer.stdout)).toMatchObject({ status: 'completed', result: { content: '{"restarted":"billing"}', isError: false } });
      await t.run(mintApprover!);
      expect(claimsOf(t.vars.APPROVER)).toMatchObject({ sub: 'alice', role: 'approver' });

      const extra = t.background(worker!);
      await untilReady(extra, 'the extra worker to log "worker pool ready"', () => extra.output().includes('worker pool ready'));
      // Pool ops has two workers now (the approver token may read the queues), and its calls still complete.
      await until('two live workers in lane host.ops', async () => (await getJson<QueueStatsList>(`${t.url}/v1/queues`, t.vars.APPROVER!)).queues.some((q) => q.lane === 'host.ops' && q.workers === 2));
      const again = await Promise.all(['alpha', 'beta', 'gamma', 'delta'].map((service) => submit(t.url, t.vars.TOKEN!, 'ops.restart', { service })));
      expect(again.map((r) => r.body.result?.content)).toEqual(['alpha', 'beta', 'gamma', 'delta'].map((s) => `{"restarted":"${s}"}`));

      // The README's /mcp agent, verbatim but for the fleet's URL: it lists, calls echo, and hears its statuses.
      writeFileSync(join(dir, 'mcp-agent.mjs'), mcpAgent!.replace('http://127.0.0.1:8080', t.url));
      // Without colours, which console.log adds where FORCE_COLOR is set (as CI runners do).
      const agent = spawnSync(process.execPath, [join(dir, 'mcp-agent.mjs')], { cwd: dir, env: { ...process.env, FORGE_TOKEN: t.vars.TOKEN, FORCE_COLOR: '0', NO_COLOR: '1' }, encoding: 'utf8', timeout: 30_000 });
      expect(agent.status, agent.stderr).toBe(0);
      // eslint-disable-next-line no-control-regex
      const printed = agent.stdout.replace(/\u001b\[[0-9;]*m/g, '');
      expect(printed).toMatch(/\bqueued\b/);
      expect(printed).toMatch(/\bcompleted\b/);
      expect(printed).toMatch(/^false \[/m);
    } finally {
      await t.close();
    }
  }, 240_000);

  it(`${FIRST_DAY}: \`npm start -- --tools ./my-tools.mjs --no-examples\` serves yours only`, async () => {
    const [, yoursOnly] = startCommands!;
    expect(yoursOnly).toMatch(/^npm start -- .*--no-examples/);
    const t = new Terminal({ dir, port: await freePort() });
    try {
      const fleet = await t.npmStart(yoursOnly!);
      expect(fleet.stdout()).not.toContain('examples/tools.ts');
      const { tools } = await getJson<{ tools: { name: string }[] }>(`${t.url}/v1/tools`, t.devFile().token);
      expect(tools.map((tool) => tool.name).sort()).toEqual(['ops.restart', 'shout']);
    } finally {
      await t.close();
    }
  }, 180_000);

  it(`${FIRST_DAY}: \`FORGE_TOOLS=./a.mjs,./b.ts npm start\`; against that fleet, the ${CLI} and ${APPROVALS} recipes`, async () => {
    const [, , fromEnv] = startCommands!;
    expect(fromEnv).toMatch(/^FORGE_TOOLS=\S+ npm start$/);
    const [tools, callWasm, approvals, approve, queues, keysLine] = shaped(CLI, cliCommands!, [
      /^npx forge tools$/,
      /^npx forge call wasm_add '.*' --wait$/,
      /^npx forge approvals$/,
      /^npx forge approvals approve <id>(\s|$)/,
      /^npx forge queues$/,
      /^npx forge keys init · /,
    ]);
    const [mintApprover, listCli, listCurl, decideCurl] = shaped(APPROVALS, approvalsCommands!, [
      /^export APPROVER=\$\(npx forge token mint .*--role approver\)$/,
      /^npx forge approvals --token "\$APPROVER"$/,
      /^curl -s \S+\/v1\/approvals -H /,
      /^curl -s -X POST \S+\/v1\/approvals\/<call id> .*"decision":"modify"/,
    ]);
    const t = new Terminal({ dir, port: await freePort() });
    try {
      const fleet = await t.npmStart(fromEnv!);
      expect(fleet.stdout()).toContain(`${join(dir, 'a.mjs')}: workers for platform, host pool ops (tools: shout, ops.restart)`);
      expect(fleet.stdout()).toContain(`${join(dir, 'b.ts')}: workers for host pool payments (tools: refund)`);
      const dev = t.devFile();
      // The reader's terminal of the first day, where `$APPROVER` was exported (the CLI's decisions use it).
      const [, , firstDayApprover] = fromRepoCommands!;
      expect(firstDayApprover).toMatch(/^export APPROVER=/);
      await t.run(firstDayApprover!);

      // CLI: it finds the fleet and its dev token in .forge/dev.json.
      const catalog = (await t.run(tools!)).stdout;
      expect(catalog).toMatch(/^NAME\s+TIER\s+POOL\s+FLAGS\s+DESCRIPTION$/m);
      for (const row of [/^clock\s+platform\s+-\s/m, /^wasm_add\s+embedded\s+-\s/m, /^shout\s+platform\s+-\s/m, /^ops\.restart\s+host\s+ops\s/m, /^refund\s+host\s+payments\s/m]) expect(catalog).toMatch(row);
      expect(JSON.parse((await t.run(callWasm!)).stdout)).toEqual({ sum: 42 });

      // A call waiting for a person: the README's `agent.call('refund', { amount: 120 })`, from the dev agent.
      const waiting = await submit(dev.url, dev.token, 'refund', { amount: 120 }, 0);
      expect(waiting).toMatchObject({ status: 202, body: { status: 'awaiting_approval' } });
      const listed = (await t.run(approvals!)).stdout;
      expect(listed).toMatch(/^ID\s+TOOL\s+ARGUMENTS\s+CALLER\s+SCOPE\s+REASON\s+DEADLINE$/m);
      // `<id>`: from the listing just printed.
      const id = /^(\S+)\s+refund\s+\{"amount":120\}\s/m.exec(listed)?.[1];
      expect(id, listed).toBe(waiting.body.id);
      expect((await t.run(approve!, { '<id>': id! })).stdout.trim()).toBe(`approved ${id}: queued`);
      expect(await ended(dev.url, dev.token, id!)).toMatchObject({ status: 'completed', result: { content: '{"refunded":120}', isError: false } });
      const lanes = (await t.run(queues!)).stdout;
      expect(lanes).toMatch(/^LANE\s+QUEUE\s+WAITING\s+ACTIVE\s+DELAYED\s+FAILED\s+WORKERS\s/m);
      for (const lane of ['platform', 'embedded', 'host', 'host.ops', 'host.payments']) expect(lanes).toMatch(new RegExp(`^${lane.replace('.', '\\.')}\\s+\\S+\\s+\\d+\\s+\\d+\\s+\\d+\\s+\\d+\\s+1\\s`, 'm'));
      // The last line names the key and token commands of "Running a fleet across machines", which the last test runs.
      for (const part of keysLine!.split(' · ')) expect(acrossCommands!.some((c) => c.startsWith(part.startsWith('npx ') ? part : `npx ${part}`)), `README "${ACROSS}" has a \`${part}\` command`).toBe(true);

      // Approvals by people: another call waits; an approver lists it (CLI and HTTP) and modifies its arguments.
      const refund = await submit(dev.url, dev.token, 'refund', { amount: 120 }, 0);
      expect(refund).toMatchObject({ status: 202, body: { status: 'awaiting_approval' } });
      await t.run(mintApprover!);
      expect(claimsOf(t.vars.APPROVER)).toMatchObject({ sub: 'alice', role: 'approver' });
      expect((await t.run(listCli!)).stdout).toMatch(new RegExp(`^${refund.body.id}\\s+refund\\s+\\{"amount":120\\}\\s+dev\\s`, 'm'));
      const list = JSON.parse((await t.run(listCurl!)).stdout) as { approvals: { id: string; tool: string; arguments: unknown }[] };
      expect(list.approvals).toEqual([expect.objectContaining({ id: refund.body.id, tool: 'refund', arguments: { amount: 120 } })]);
      // `<call id>`: from the list the curl above printed.
      const decided = JSON.parse((await t.run(decideCurl!, { '<call id>': list.approvals[0]!.id })).stdout) as CallView;
      expect(decided).toMatchObject({ id: refund.body.id, status: 'queued' });
      expect(await ended(dev.url, dev.token, refund.body.id)).toMatchObject({ status: 'completed', result: { content: '{"refunded":100}', isError: false } });
    } finally {
      await t.close();
    }
  }, 240_000);

  it(`${ACROSS}: keys, a worker key, a token, a dispatcher and a platform and a payments worker serve a call made with that token`, async () => {
    const [keysInit, workerKey, mint, dispatcher, ...workers] = shaped(ACROSS, acrossCommands!, [
      /^npx forge keys init --dir \S+$/,
      /^npx forge keys worker-key --secret \S+ --tier \S+( --pool \S+)?$/,
      /^npx forge token mint --key \S+ /,
      /^REDIS_URL=\S+ .*npx forge-dispatcher$/,
      /^REDIS_URL=\S+ FORGE_CALL_KEY=<[a-z]+ key> npx forge-worker --tier platform /,
      /^REDIS_URL=\S+ FORGE_CALL_KEY=<[a-z]+ key> npx forge-worker --tier host --pool payments /,
    ]);
    const t = new Terminal({ dir, port: await freePort() });
    try {
      await t.run(keysInit!);
      for (const file of ['token.key', 'token.pub', 'signing.secret']) expect(existsSync(join(dir, 'keys', file)), file).toBe(true);
      // Worker keys by `--tier … [--pool …]`: the README prints the payments one; the platform one comes from the same
      // command for that tier (a FORGE_CALL_KEY is 32 bytes, base64url).
      const tierArgs = /--tier \S+( --pool \S+)?/;
      const keys = new Map([[tierArgs.exec(workerKey!)![0], (await t.run(workerKey!)).stdout.trim()]]);
      const keyFor = async (args: string): Promise<string> => {
        if (!keys.has(args)) keys.set(args, (await t.run(workerKey!.replace(tierArgs, args))).stdout.trim());
        return keys.get(args)!;
      };
      for (const key of keys.values()) expect(key).toMatch(/^[A-Za-z0-9_-]{43}$/);

      const token = (await t.run(mint!)).stdout.trim();
      const claims = claimsOf(token);
      expect(claims).toMatchObject({ sub: 'agent-7', role: 'agent', grants: ['db.*'] });
      expect(Number(claims.exp) - Number(claims.iat)).toBe(3600);

      const d = t.background(dispatcher!);
      await untilReady(d, `the dispatcher's ${t.url}/readyz to answer 200`, async () => (await fetch(`${t.url}/readyz`)).ok);
      for (const command of workers) {
        const args = tierArgs.exec(command)![0];
        const placeholder = /<[a-z]+ key>/.exec(command)![0];
        // The placeholder names the worker's pool, else its tier.
        expect(placeholder).toBe(`<${/--pool (\S+)/.exec(args)?.[1] ?? /--tier (\S+)/.exec(args)![1]} key>`);
        const w = t.background(command, { [placeholder]: await keyFor(args) });
        await untilReady(w, `\`${args}\` worker to log "worker pool ready"`, () => w.output().includes('worker pool ready'));
      }

      const { tools } = await getJson<{ tools: { name: string; tier: string; pool?: string }[] }>(`${t.url}/v1/tools`, token);
      expect(tools).toEqual(expect.arrayContaining([expect.objectContaining({ name: 'shout', tier: 'platform' }), expect.objectContaining({ name: 'refund', tier: 'host', pool: 'payments' })]));
      expect(await submit(t.url, token, 'shout', { text: 'across machines' })).toMatchObject({ status: 200, body: { status: 'completed', result: { content: 'ACROSS MACHINES', isError: false } } });
    } finally {
      try {
        await t.close();
      } finally {
        // The README's fleet uses the default prefix on the test run's Redis (the CLI derives worker keys for it): leave nothing there.
        await clearPrefix('forge');
      }
    }
  }, 180_000);
});

describe(`README.md "${MCP_SERVERS}", run as written`, () => {
  const dir = mkdtempSync(join(tmpdir(), 'forge-readme-mcp-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  beforeAll(() => {
    // A node_modules of its own, as a clone has: a symlink to the repository's would be refused as a declared sandbox
    // path (one must lead to itself). Hard links where the file system allows, else a copy.
    const copy = spawnSync('cp', ['-al', join(ROOT, 'node_modules'), join(dir, 'node_modules')], { encoding: 'utf8', timeout: 110_000 });
    if (copy.status !== 0) {
      rmSync(join(dir, 'node_modules'), { recursive: true, force: true });
      const full = spawnSync('cp', ['-a', join(ROOT, 'node_modules'), join(dir, 'node_modules')], { encoding: 'utf8', timeout: 170_000 });
      expect(full.status, `cp -a node_modules: ${full.stderr}`).toBe(0);
    }
    // The workspace's own packages are relative links (../../apps/cli): pointed at the repository's, as from a clone.
    const scope = join(ROOT, 'node_modules', '@forge-fleet');
    for (const name of readdirSync(scope)) {
      const link = join(dir, 'node_modules', '@forge-fleet', name);
      rmSync(link, { force: true });
      symlinkSync(realpathSync(join(scope, name)), link, 'dir');
    }
    const build = spawnSync('npm', ['run', 'prepare', '--silent'], { cwd: ROOT, encoding: 'utf8', timeout: 110_000 });
    expect(build.status, `npm run prepare: ${build.stderr}`).toBe(0);
  });

  it('the filesystem server from a sandboxed pool, called by an agent with the CLI; a path outside its root fails', async () => {
    const lines = mcpSetup!.split('\n');
    const at = lines.findIndex((l) => /^npm start -- .*--mcp /.test(l));
    expect(at, `README "${MCP_SERVERS}": its first block ends with \`npm start -- --mcp …\``).toBeGreaterThan(0);
    const [exportToken, call] = shaped(MCP_SERVERS, shellCommands(mcpAgentCommands!), [/^export FORGE_TOKEN=/, /^npx forge call files\.\S+ /]);
    const t = new Terminal({ dir, port: await freePort() });
    try {
      await t.run(lines.slice(0, at).join('\n'));
      expect(existsSync(join(dir, 'servers.yaml'))).toBe(true);
      const fleet = await t.npmStart(lines[at]!);
      expect(fleet.stdout()).toMatch(/servers\.yaml: workers for platform \(MCP servers: files \(files\.\*\)\)/);
      await t.run(exportToken!);
      const answer = await t.run(call!);
      expect(answer.stdout).toContain('hello from a sandboxed MCP server');
      // The same tool, asked for a file outside the directory it was given: the server refuses, the call fails.
      const outside = await submit(t.url, t.vars.FORGE_TOKEN!, 'files.read_text_file', { path: '/etc/hostname' });
      expect(outside.body).toMatchObject({ status: 'failed', result: { isError: true } });
      // Nor can it list the fleet's own state (its keys): outside its root, and outside its sandbox's view.
      const keys = await submit(t.url, t.vars.FORGE_TOKEN!, 'files.list_directory', { path: stateDirOf({ dir, port: 0 }) });
      expect(keys.body).toMatchObject({ status: 'failed', result: { isError: true } });
    } finally {
      try {
        await t.close();
      } finally {
        await clearPrefix('forge');
      }
    }
  }, 240_000);
});

/** Deletes the keys of fleet prefix `prefix` from the test run's Redis. */
async function clearPrefix(prefix: string): Promise<void> {
  const redis = new Redis(redisUrl(), { maxRetriesPerRequest: 1, lazyConnect: true });
  await redis.connect();
  try {
    for await (const keys of redis.scanStream({ match: `${prefix}:*`, count: 500 }) as AsyncIterable<string[]>) if (keys.length > 0) await redis.del(...keys);
  } finally {
    redis.disconnect();
  }
}
