import { fstatSync, closeSync, readSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { openSeccompFilter, seccompFilter } from './seccomp-filter.js';

describe('the Unix-socket seccomp filter', () => {
  it('is a program of 8-byte instructions for x86-64 and arm64, ending in allow; none elsewhere', () => {
    for (const arch of ['x64', 'arm64']) {
      const program = seccompFilter(arch)!;
      expect(program.length % 8).toBe(0);
      // The last instruction returns SECCOMP_RET_ALLOW; the first loads the architecture.
      expect(program.readUInt16LE(program.length - 8)).toBe(0x06);
      expect(program.readUInt32LE(program.length - 4)).toBe(0x7fff0000);
      expect(program.readUInt32LE(4)).toBe(4);
    }
    expect(seccompFilter('x64')!.equals(seccompFilter('arm64')!)).toBe(false);
    expect(seccompFilter('riscv64')).toBeUndefined();
  });

  it('opens a descriptor of its own for each launch, at the program\'s start, with no file left behind', () => {
    const [a, b] = [openSeccompFilter(), openSeccompFilter()];
    try {
      expect(a).not.toBe(b);
      const size = fstatSync(a!).size;
      expect(size).toBe(seccompFilter()!.length);
      const read = Buffer.alloc(size);
      expect(readSync(a!, read, 0, size, null)).toBe(size);
      expect(read.equals(seccompFilter()!)).toBe(true);
      expect(fstatSync(a!).nlink).toBe(0);
    } finally {
      closeSync(a!);
      closeSync(b!);
    }
  });
});
