/**
 * Makes a host server a child subreaper (`PR_SET_CHILD_SUBREAPER`) before it
 * starts: what it starts and then orphans stays its descendant.
 *
 * Why: a daemon forks twice and its middle process exits, so its parent is
 * gone. The kernel hands such an orphan to the nearest subreaper above it,
 * else to PID 1, where nothing ties it to the server any more: the worker's
 * sweep of the server's descendants (process-tree.ts) would miss it at the
 * instance's end, and it would outlive even a clean shutdown. With the server
 * a subreaper, the orphan is handed to the server itself, and the sweep finds
 * it. The attribute survives `execve`, so it is set by a small program that
 * then execs the rest of the launch, keeping the server's pid.
 *
 * Perl (perl-base, essential on Debian) is that program: Node cannot call
 * prctl, and no util-linux tool sets this one. Without perl, or on an
 * architecture whose system call number is not known here, servers start
 * as before and docs/mcp-servers.md says what escapes then. The cost: an
 * adopted orphan that exits stays a zombie of the server until the server
 * reaps it or ends (servers wait only for the children they started).
 */

/** Linux's prctl system call number, by Node's `process.arch`. */
const PRCTL: Readonly<Record<string, number>> = Object.freeze({ x64: 157, arm64: 167 });
const PR_SET_CHILD_SUBREAPER = 36;

/**
 * The wrapper that makes the process a subreaper and execs its arguments, or
 * `[]` where it cannot be made.
 *
 * @param perl the absolute path of perl on the worker's PATH, when there is one.
 */
export function subreaperWrapper(perl: string | undefined, arch: string = process.arch): string[] {
  const nr = PRCTL[arch];
  if (perl === undefined || nr === undefined) return [];
  const script = `syscall(${nr}, ${PR_SET_CHILD_SUBREAPER}, 1, 0, 0, 0) == 0 or warn "forge: cannot become a child subreaper: $!\\n"; exec { $ARGV[0] } @ARGV or die "forge: cannot exec $ARGV[0]: $!\\n";`;
  return [perl, '-e', script, '--'];
}
