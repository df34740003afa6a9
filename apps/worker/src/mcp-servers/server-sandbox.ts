/**
 * The rlimits of each process of a sandboxed MCP server. A server is a
 * long-lived process that serves many calls, so these bound a runaway, not a
 * single call (the tool sandbox's per-call DEFAULT_LIMITS do not fit here).
 */
export interface ServerLimits {
  /**
   * CPU time each process of the server may use over its whole life, in seconds; past it the kernel kills
   * the process and the pool replaces it like any instance that died.
   * @defaultValue 3600
   */
  readonly cpuSeconds: number;
  /**
   * Private writable memory (RLIMIT_DATA) of each process, in MiB: allocations past it fail.
   * @defaultValue 2048
   */
  readonly memoryMb: number;
  /**
   * Open descriptors of each process (RLIMIT_NOFILE).
   * @defaultValue 1024
   */
  readonly openFiles: number;
  /**
   * Processes of the worker's user that may exist when the server forks (RLIMIT_NPROC). The kernel counts
   * them per user, not per server, and does not apply the limit to root.
   * @defaultValue 4096
   */
  readonly processes: number;
}

/** The limits a server gets for what it does not declare. */
export const SERVER_LIMIT_DEFAULTS: ServerLimits = Object.freeze({ cpuSeconds: 3600, memoryMb: 2048, openFiles: 1024, processes: 4096 });

/**
 * The confinement of a Platform- or Embedded-tier MCP server process (see
 * server-sandbox-command.ts for how it is built and docs/mcp-servers.md, "Isolation").
 */
export interface ServerSandbox {
  /** Absolute paths the server sees read-only (besides the system's own files it needs to run). */
  readonly read: readonly string[];
  /** Absolute paths the server sees writable. */
  readonly write: readonly string[];
  /** Its rlimits; each one not given is taken from {@link SERVER_LIMIT_DEFAULTS}. */
  readonly limits?: Partial<ServerLimits>;
}
