import { describe, expect, it } from 'vitest';
import { descendantsOf, killEach, type ProcessEntry, processTable } from './process-tree.js';

const entry = (pid: number, ppid: number, pgrp = ppid): ProcessEntry => ({ pid, ppid, pgrp, session: pgrp, state: 'S', start: String(pid * 10), comm: `p${pid}` });

describe('descendantsOf', () => {
  it('finds children and their children whatever group they are in, and nothing else', () => {
    const table = [entry(1, 0), entry(10, 1), entry(11, 10, 10), entry(12, 11, 12), entry(13, 12, 13), entry(20, 1), entry(21, 20)];
    expect(descendantsOf(10, table).map((p) => p.pid)).toEqual([11, 12, 13]);
    expect(descendantsOf(13, table)).toEqual([]);
    expect(descendantsOf(999, table)).toEqual([]);
  });

  it('ends on a table whose parents form a loop (a pid reused while /proc was read)', () => {
    expect(descendantsOf(5, [entry(5, 6), entry(6, 5)]).map((p) => p.pid)).toEqual([6]);
  });
});

describe('killEach', () => {
  it('leaves alone a pid that now names another process (its start time differs), and one that is gone', () => {
    const self = processTable().find((p) => p.pid === process.pid);
    expect(self).toBeDefined();
    // Were the check missing, this would SIGKILL the test process itself.
    killEach([{ ...(self as ProcessEntry), start: 'not-its-start' }, { ...(self as ProcessEntry), pid: 2 ** 22 + 1 }]);
    expect(processTable().some((p) => p.pid === process.pid)).toBe(true);
  });
});
