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
    const pinned = PinnedPaths.open('s', [join(dir, 'data'), join(dir, 'keys')], undefined);
    expect(pinned.descriptors.map((fd) => readlinkSync(`/proc/self/fd/${fd}`))).toEqual([join(dir, 'data'), join(dir, 'keys')]);
    pinned.close();
    pinned.close();
  });

  it('refuses a path replaced by a symlink since the worker read its servers file, saying where it leads now', () => {
    const victim = join(dir, 'victim');
    mkdirSync(victim);
    const hostPaths = { [victim]: victim };
    renameSync(victim, join(dir, 'victim.orig'));
    symlinkSync(join(dir, 'keys'), victim);
    expect(() => PinnedPaths.open('reader', [join(dir, 'data'), victim], hostPaths)).toThrow(new RegExp(`declared path ${victim} now leads to ${join(dir, 'keys')}, not to ${victim}`));
    expect(() => PinnedPaths.open('reader', [victim], hostPaths)).toThrow(expect.objectContaining({ code: 'UNAVAILABLE' }) as Error);
  });

  it('binds a path that was a symlink when the file was read, as long as it leads where it led then', () => {
    const link = join(dir, 'link');
    symlinkSync(join(dir, 'real'), link);
    const pinned = PinnedPaths.open('s', [link], { [link]: join(dir, 'real') });
    expect(readlinkSync(`/proc/self/fd/${pinned.descriptors[0]!}`)).toBe(join(dir, 'real'));
    pinned.close();
  });

  it('refuses a path that is gone', () => {
    expect(() => PinnedPaths.open('s', [join(dir, 'nothing')], undefined)).toThrow(/declared path .*nothing cannot be opened \(ENOENT\)/);
  });
});
