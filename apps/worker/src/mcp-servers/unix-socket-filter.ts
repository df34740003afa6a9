import { mkdtempSync, openSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * A seccomp filter (classic BPF, as bubblewrap's `--seccomp FD` loads it) that
 * refuses a sandboxed server any Unix-domain socket of its own.
 *
 * Why: a read-only bind does not stop `connect()`. A host service listening
 * on a socket file inside a declared `read` path (a database, an agent, a
 * Docker socket under a project directory) would be reachable from the
 * sandbox, though the server has no network. The filter makes
 * `socket(AF_UNIX, …)` fail with `EACCES`, so no path socket can be
 * connected to (or bound), whatever the view holds. `socketpair(AF_UNIX, …)`
 * fails too for datagram sockets, which `sendto` (or a second `connect`) can
 * aim at any socket path however they were made; a stream or seqpacket pair
 * stays connected to its peer for good, and stays allowed (Node's child
 * processes talk over one).
 * `io_uring_setup` fails with `ENOSYS` (programs fall back to plain system
 * calls), since io_uring's operations would get past a filter on system
 * calls; and so does every call of another ABI (x32, 32-bit), which the
 * numbers below do not describe.
 */

interface Arch {
  /** AUDIT_ARCH_* of the kernel's seccomp_data. */
  readonly audit: number;
  readonly socket: number;
  readonly socketpair: number;
  readonly ioUringSetup: number;
}

/** Node's `process.arch` to the numbers of its system calls; other architectures get no filter. */
const ARCHES: Readonly<Record<string, Arch>> = Object.freeze({
  x64: { audit: 0xc000003e, socket: 41, socketpair: 53, ioUringSetup: 425 },
  arm64: { audit: 0xc00000b7, socket: 198, socketpair: 199, ioUringSetup: 425 },
});

const AF_UNIX = 1;
const SOCK_DGRAM = 2;
/** A socket type's low bits; the others are flags (SOCK_NONBLOCK, SOCK_CLOEXEC). */
const SOCK_TYPE_MASK = 0xf;
const EACCES = 13;
const ENOSYS = 38;
/** x86-64's x32 ABI marks its system call numbers with this bit. */
const X32_SYSCALL_BIT = 0x40000000;

const LD_W_ABS = 0x20;
const JEQ_K = 0x15;
const JGE_K = 0x35;
const AND_K = 0x54;
const RET_K = 0x06;
const RET_ALLOW = 0x7fff0000;
const RET_ERRNO = 0x00050000;
/** Offsets in struct seccomp_data: nr, arch, then (after the instruction pointer) args[0] and args[1], read as their low 32 bits. */
const NR = 0;
const ARCH = 4;
const ARG0 = 16;
const ARG1 = 24;

/** The filter's program for `arch`, or undefined where it has none. */
export function unixSocketFilter(arch: string = process.arch): Buffer | undefined {
  const a = ARCHES[arch];
  if (a === undefined) return undefined;
  const program: [code: number, jt: number, jf: number, k: number][] = [
    [LD_W_ABS, 0, 0, ARCH],
    [JEQ_K, 1, 0, a.audit],
    [RET_K, 0, 0, RET_ERRNO | ENOSYS],
    [LD_W_ABS, 0, 0, NR],
    [JGE_K, 0, 1, X32_SYSCALL_BIT],
    [RET_K, 0, 0, RET_ERRNO | ENOSYS],
    [JEQ_K, 0, 1, a.ioUringSetup],
    [RET_K, 0, 0, RET_ERRNO | ENOSYS],
    // socket(AF_UNIX, …): refused.
    [JEQ_K, 0, 3, a.socket],
    [LD_W_ABS, 0, 0, ARG0],
    [JEQ_K, 0, 8, AF_UNIX],
    [RET_K, 0, 0, RET_ERRNO | EACCES],
    // socketpair(AF_UNIX, SOCK_DGRAM, …): refused.
    [JEQ_K, 0, 6, a.socketpair],
    [LD_W_ABS, 0, 0, ARG0],
    [JEQ_K, 0, 4, AF_UNIX],
    [LD_W_ABS, 0, 0, ARG1],
    [AND_K, 0, 0, SOCK_TYPE_MASK],
    [JEQ_K, 0, 1, SOCK_DGRAM],
    [RET_K, 0, 0, RET_ERRNO | EACCES],
    [RET_K, 0, 0, RET_ALLOW],
  ];
  const bytes = Buffer.alloc(program.length * 8);
  program.forEach(([code, jt, jf, k], i) => {
    bytes.writeUInt16LE(code, i * 8);
    bytes.writeUInt8(jt, i * 8 + 2);
    bytes.writeUInt8(jf, i * 8 + 3);
    bytes.writeUInt32LE(k >>> 0, i * 8 + 4);
  });
  return bytes;
}

/**
 * A descriptor to read the filter from, at its start: bubblewrap reads it to
 * its end, so each launch needs one of its own. The file it was written to
 * is gone before this returns (a private directory, removed), so nothing is
 * left on disk and nobody else could have swapped it.
 *
 * @returns undefined on an architecture with no filter.
 */
export function openUnixSocketFilter(): number | undefined {
  const program = unixSocketFilter();
  if (program === undefined) return undefined;
  const dir = mkdtempSync(join(tmpdir(), 'forge-seccomp-'));
  try {
    const path = join(dir, 'filter.bpf');
    writeFileSync(path, program, { mode: 0o600 });
    return openSync(path, 'r');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
