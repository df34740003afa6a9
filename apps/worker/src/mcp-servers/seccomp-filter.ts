import { mkdtempSync, openSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * The seccomp filter (classic BPF, as bubblewrap's `--seccomp FD` loads it)
 * of a sandboxed server: the system calls its other layers do not cover.
 *
 * - **No Unix-domain socket of its own.** A read-only bind does not stop
 *   `connect()`: a host service listening on a socket file inside a declared
 *   `read` path (a database, an agent, a Docker socket under a project
 *   directory) would be reachable, though the server has no network.
 *   `socket(AF_UNIX, …)` fails with `EACCES`, and so does a datagram
 *   `socketpair(AF_UNIX, …)`, which `sendto` (or a second `connect`) can aim
 *   at any socket path; a stream or seqpacket pair stays connected to its
 *   peer for good, and stays allowed (Node's child processes talk over one).
 * - **No socket family the network namespace does not cover.** Only IPv4,
 *   IPv6 and netlink (which `getifaddrs` uses) sockets are made; any other
 *   family fails with `EAFNOSUPPORT`: vsock reaches the hypervisor of a
 *   virtual machine whatever the namespace, and the rest (packet, Bluetooth,
 *   CAN, the kernel's crypto sockets…) is kernel surface a server needs none of.
 * - **No set-user-ID or set-group-ID file.** A worker run by root makes the
 *   sandbox's root the host's root to the kernel: a root-owned program it
 *   marked set-user-ID in a declared `write` path would give whoever runs it
 *   on the host root. `chmod` and its kin, and `open`/`creat`/`mknod` with
 *   such a mode, fail with `EPERM`; `openat2` (whose mode a filter cannot
 *   read) with `ENOSYS`, and programs fall back to `openat`.
 * - **No tracing of its own sandbox.** `ptrace`, `process_vm_readv`/`writev`
 *   and `pidfd_getfd` fail with `EPERM`: a server that stopped bubblewrap's
 *   init in its namespace, then exited, would keep the instance alive behind
 *   a stopped process, its calls waiting for their timeout.
 * - `io_uring_setup` fails with `ENOSYS` (programs fall back to plain system
 *   calls), since io_uring's operations would get past a filter on system
 *   calls; and so does every call of another ABI (x32, 32-bit), which the
 *   numbers below do not describe.
 */

interface Arch {
  /** AUDIT_ARCH_* of the kernel's seccomp_data. */
  readonly audit: number;
  readonly socket: number;
  readonly socketpair: number;
  readonly ioUringSetup: number;
  /** ptrace, process_vm_readv, process_vm_writev, pidfd_getfd. */
  readonly tracing: readonly number[];
  /** The calls that set a file's mode, by the argument the mode is: chmod, fchmod, creat, mknod (1); fchmodat, fchmodat2, open, mknodat (2); openat (3). */
  readonly modeAt: Readonly<Record<1 | 2 | 3, readonly number[]>>;
  /** openat2: its mode is in a struct a filter cannot read. */
  readonly openat2: number;
}

/** Node's `process.arch` to the numbers of its system calls; other architectures get no filter. */
const ARCHES: Readonly<Record<string, Arch>> = Object.freeze({
  x64: { audit: 0xc000003e, socket: 41, socketpair: 53, ioUringSetup: 425, tracing: [101, 310, 311, 438], modeAt: { 1: [90, 91, 85, 133], 2: [268, 452, 2, 259], 3: [257] }, openat2: 437 },
  arm64: { audit: 0xc00000b7, socket: 198, socketpair: 199, ioUringSetup: 425, tracing: [117, 270, 271, 438], modeAt: { 1: [52], 2: [53, 452, 33], 3: [56] }, openat2: 437 },
});

const AF_UNIX = 1;
/** The families a sandboxed server may make sockets of: IPv4, IPv6 and netlink. */
const ALLOWED_FAMILIES = [2, 10, 16];
const SOCK_DGRAM = 2;
/** A socket type's low bits; the others are flags (SOCK_NONBLOCK, SOCK_CLOEXEC). */
const SOCK_TYPE_MASK = 0xf;
const EPERM = 1;
const EACCES = 13;
const ENOSYS = 38;
const EAFNOSUPPORT = 97;
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
/** Offset of the low 32 bits of argument `n`. */
const argAt = (n: number): number => ARG0 + 8 * n;
/** S_ISUID | S_ISGID. */
const SET_ID_BITS = 0o6000;

/** One instruction, its jumps by label (the instruction after it when absent); or a label, where the next instruction is. */
type Step = { readonly code: number; readonly k: number; readonly jt?: string; readonly jf?: string } | { readonly label: string };

const load = (offset: number): Step => ({ code: LD_W_ABS, k: offset });
const ret = (value: number): Step => ({ code: RET_K, k: value });
const errno = (n: number): Step => ret(RET_ERRNO | n);
const label = (name: string): Step => ({ label: name });
/** If the accumulator is `k`, go to `then`; else on (or to `otherwise`). */
const ifEq = (k: number, then: string, otherwise?: string): Step => ({ code: JEQ_K, k, jt: then, ...(otherwise === undefined ? {} : { jf: otherwise }) });

/** The filter's program for `arch`, or undefined where it has none. */
export function seccompFilter(arch: string = process.arch): Buffer | undefined {
  const a = ARCHES[arch];
  if (a === undefined) return undefined;
  return assemble([
    load(ARCH),
    ifEq(a.audit, 'native', 'nosys'),
    label('native'),
    load(NR),
    { code: JGE_K, k: X32_SYSCALL_BIT, jt: 'nosys' },
    ifEq(a.ioUringSetup, 'nosys'),
    ...a.tracing.map((nr) => ifEq(nr, 'eperm')),
    ...([1, 2, 3] as const).flatMap((n) => a.modeAt[n].map((nr) => ifEq(nr, `mode${n}`))),
    ifEq(a.openat2, 'nosys'),
    ifEq(a.socket, 'socket'),
    ifEq(a.socketpair, 'socketpair', 'allow'),
    // socket(family, …): AF_UNIX refused; the allowed families made; any other refused.
    label('socket'),
    load(ARG0),
    ifEq(AF_UNIX, 'eacces'),
    ...ALLOWED_FAMILIES.map((family) => ifEq(family, 'allow')),
    errno(EAFNOSUPPORT),
    // socketpair(AF_UNIX, SOCK_DGRAM, …): refused; other pairs made (only AF_UNIX makes pairs at all).
    label('socketpair'),
    load(ARG0),
    ifEq(AF_UNIX, 'unixpair', 'allow'),
    label('unixpair'),
    load(ARG1),
    { code: AND_K, k: SOCK_TYPE_MASK },
    ifEq(SOCK_DGRAM, 'eacces', 'allow'),
    // A mode with the set-user-ID or set-group-ID bit: refused, whatever else it holds.
    ...([1, 2, 3] as const).flatMap((n) => [label(`mode${n}`), load(argAt(n)), { code: AND_K, k: SET_ID_BITS }, ifEq(0, 'allow', 'eperm')]),
    label('eacces'),
    errno(EACCES),
    label('eperm'),
    errno(EPERM),
    label('nosys'),
    errno(ENOSYS),
    label('allow'),
    ret(RET_ALLOW),
  ]);
}

/** The program's bytes: each instruction 8 bytes, its jumps resolved to the (forward) distances BPF takes. */
function assemble(steps: readonly Step[]): Buffer {
  const at = new Map<string, number>();
  const program: { code: number; k: number; jt?: string; jf?: string }[] = [];
  for (const step of steps) {
    if ('label' in step) at.set(step.label, program.length);
    else program.push(step);
  }
  const bytes = Buffer.alloc(program.length * 8);
  program.forEach((op, i) => {
    const jump = (name: string | undefined): number => {
      if (name === undefined) return 0;
      const target = at.get(name);
      if (target === undefined || target <= i || target - i - 1 > 255) throw new Error(`seccomp filter: no forward jump to '${name}' from ${i}`);
      return target - i - 1;
    };
    bytes.writeUInt16LE(op.code, i * 8);
    bytes.writeUInt8(jump(op.jt), i * 8 + 2);
    bytes.writeUInt8(jump(op.jf), i * 8 + 3);
    bytes.writeUInt32LE(op.k >>> 0, i * 8 + 4);
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
export function openSeccompFilter(): number | undefined {
  const program = seccompFilter();
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
