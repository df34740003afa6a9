import { mkdirSync, mkdtempSync, readlinkSync, renameSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PinnedPaths } from './pinned-paths.js';

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'forge-pinned-'));
  for (const d of ['data', 'keys', 'real']) mkdirSync(join(dir, d));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('PinnedPaths', () => {
  it('opens each path, as descriptors that lead where the path led', () => {
    const pinned = PinnedPaths.open('s', [join(dir, 'data'), join(dir, 'keys')]);
    expect(pinned.descriptors.map((fd) => readlinkSync(`/proc/self/fd/${fd}`))).toEqual([join(dir, 'data'), join(dir, 'keys')]);
    pinned.close();
    pinned.close();
  });

  it('refuses a path replaced by a symlink, or a path whose parent was, saying where it leads now', () => {
    const victim = join(dir, 'victim');
    mkdirSync(victim);
    renameSync(victim, join(dir, 'victim.orig'));
    symlinkSync(join(dir, 'keys'), victim);
    expect(() => PinnedPaths.open('reader', [join(dir, 'data'), victim])).toThrow(new RegExp(`declared path ${victim} now leads to ${join(dir, 'keys')} \\(was it replaced by a symlink\\?\\)`));
    expect(() => PinnedPaths.open('reader', [victim])).toThrow(expect.objectContaining({ code: 'UNAVAILABLE' }) as Error);
    const parent = join(dir, 'parent');
    mkdirSync(join(parent, 'child'), { recursive: true });
    mkdirSync(join(dir, 'elsewhere', 'child'), { recursive: true });
    renameSync(parent, join(dir, 'parent.orig'));
    symlinkSync(join(dir, 'elsewhere'), parent);
    expect(() => PinnedPaths.open('reader', [join(parent, 'child')])).toThrow(/now leads to .*elsewhere\/child/);
  });

  it('refuses a path that leads elsewhere through a symlink, even one made before the worker started', () => {
    const link = join(dir, 'link');
    symlinkSync(join(dir, 'real'), link);
    expect(() => PinnedPaths.open('s', [link])).toThrow(/declared path .*link now leads to .*real/);
  });

  it('refuses a path that is gone', () => {
    expect(() => PinnedPaths.open('s', [join(dir, 'nothing')])).toThrow(/declared path .*nothing cannot be opened \(ENOENT\)/);
  });
});
