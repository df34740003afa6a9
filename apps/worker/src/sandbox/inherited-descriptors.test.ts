import { spawn } from 'node:child_process';
import { closeSync, mkdirSync, mkdtempSync, openSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeOnExec, inheritedDescriptors } from './inherited-descriptors.js';

const ROOT = fileURLToPath(new URL('../../../..', import.meta.url));
const MODULE = new URL('./inherited-descriptors.ts', import.meta.url).href;

/** Where the child gets what it inherits: above the 0–15 that Node marks close-on-exec at start itself. */
const FILE_FD = 40;
const DIRECTORY_FD = 41;
const IPC_FD = 42;
/** Below 16: Node's start-up (libuv's uv_disable_stdio_inheritance) marks it close-on-exec, so it is no concern. */
const LOW_FD = 5;

/** A descriptor a process holds, by what it refers to: `dev:ino`. */
type Held = string;

/** What the child reports over its IPC channel, which must still work after the closing. */
interface Report {
  found: number[];
  closed: number[];
  /** Its own descriptors after the closing. */
  left: Held[];
  /** The descriptors of a process it spawns after the closing. */
  grandchild: Held[];
}

/** Lists the descriptors above stdio of the process it runs in as `dev:ino` (fstat only: never reads). */
const LIST_HELD = `(() => {
  const fs = require('node:fs');
  const held = [];
  for (const name of fs.readdirSync('/proc/self/fd')) {
    if (Number(name) < 3) continue;
    try { const s = fs.fstatSync(Number(name)); held.push(s.dev + ':' + s.ino); } catch {}
  }
  return held;
})()`;

/**
 * Runs the module in a fresh Node process that inherited a file and a
 * directory without close-on-exec, as a shell's `40</file 41</dir` gives them
 * (Node itself cannot open a descriptor without the flag), and an IPC channel.
 */
function runChild(file: number, directory: number): Promise<Report> {
  const script = `
    import { spawnSync } from 'node:child_process';
    import { createRequire } from 'node:module';
    const require = createRequire(import.meta.url);
    const { inheritedDescriptors, closeInheritedDescriptors } = await import(${JSON.stringify(MODULE)});
    const found = inheritedDescriptors([${IPC_FD}]);
    const closed = closeInheritedDescriptors();
    const left = ${LIST_HELD};
    const listing = spawnSync(process.execPath, ['-p', ${JSON.stringify(`JSON.stringify(${LIST_HELD})`)}], { encoding: 'utf8' });
    process.send({ found, closed, left, grandchild: JSON.parse(listing.stdout) }, () => process.disconnect());
  `;
  const stdio: ('ignore' | 'pipe' | 'ipc' | number)[] = ['ignore', 'pipe', 'pipe'];
  while (stdio.length <= IPC_FD) stdio.push('ignore');
  stdio[LOW_FD] = file;
  stdio[FILE_FD] = file;
  stdio[DIRECTORY_FD] = directory;
  stdio[IPC_FD] = 'ipc';
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: ROOT, stdio });
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  return new Promise((resolve, reject) => {
    child.once('message', (report) => resolve(report as Report));
    child.once('exit', (code) => reject(new Error(`the child exited (${code}) without a report:\n${output}`)));
  });
}

describe('closeOnExec', () => {
  it("reads O_CLOEXEC from fdinfo's octal flags", () => {
    expect(closeOnExec('pos:\t0\nflags:\t02100000\nmnt_id:\t27\nino:\t612\n')).toBe(true);
    expect(closeOnExec('pos:\t0\nflags:\t0100000\nmnt_id:\t27\n')).toBe(false);
    expect(closeOnExec('pos:\t0\nflags:\t01\n')).toBe(false);
    expect(closeOnExec('pos:\t0\nflags:\t02004002\n')).toBe(true);
  });

  it('knows nothing without a flags line', () => {
    expect(closeOnExec('pos:\t0\nmnt_id:\t27\n')).toBeUndefined();
  });
});

describe('inheritedDescriptors', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'forge-fdinfo-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('lists, in order, the descriptors above stdio open without close-on-exec, but those to keep', () => {
    const proc = join(dir, 'proc');
    mkdirSync(join(proc, 'fdinfo'), { recursive: true });
    const flags = { 0: '0100002', 2: '0100001', 3: '02000002', 12: '0100000', 9: '04002', 30: '01', 31: '02004000' };
    for (const [fd, value] of Object.entries(flags)) writeFileSync(join(proc, 'fdinfo', fd), `pos:\t0\nflags:\t${value}\n`);
    writeFileSync(join(proc, 'fdinfo', '14'), 'pos:\t0\n');
    expect(inheritedDescriptors([], proc)).toEqual([9, 12, 30]);
    expect(inheritedDescriptors([30], proc)).toEqual([9, 12]);
  });

  it('is undefined where there is no fdinfo to read (not Linux)', () => {
    expect(inheritedDescriptors([], join(dir, 'nothing'))).toBeUndefined();
  });
});

describe('closeInheritedDescriptors, in a process that inherited descriptors', () => {
  let base: string;
  let file: number;
  let directory: number;
  beforeAll(() => {
    base = mkdtempSync(join(tmpdir(), 'forge-inherited-'));
    writeFileSync(join(base, 'secret.txt'), 'secret');
    file = openSync(join(base, 'secret.txt'), 'r');
    directory = openSync(base, 'r');
  });
  afterAll(() => {
    closeSync(file);
    closeSync(directory);
    rmSync(base, { recursive: true, force: true });
  });

  it('closes the file and the directory, keeps its IPC channel working (it reports through it), and what it spawns next gets neither', async () => {
    const report = await runChild(file, directory);
    // Besides the two: whatever this test runner itself inherited without the flag, passed on to the child as well.
    expect(report.found).toEqual(expect.arrayContaining([FILE_FD, DIRECTORY_FD]));
    expect(report.found).not.toContain(LOW_FD);
    expect(report.closed).toEqual(report.found);
    const ids = [statSync(join(base, 'secret.txt')), statSync(base)].map((s) => `${s.dev}:${s.ino}`);
    // The child still holds the file at LOW_FD, which Node made close-on-exec; nothing holds the directory.
    expect(report.left.filter((held) => ids.includes(held))).toEqual([ids[0]]);
    expect(report.grandchild.filter((held) => ids.includes(held))).toEqual([]);
  }, 20_000);
});
