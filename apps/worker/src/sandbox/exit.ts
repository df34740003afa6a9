import { ExecutionFailedError, type FleetError, ResourceLimitError } from '@forge-fleet/shared';

/** What V8 prints before it aborts on a heap limit or a failed reservation. */
const V8_OOM = /JavaScript heap out of memory|Reached heap limit|Fatal process OOM|Fatal JavaScript invalid size error/;
/** RLIMIT_CPU's soft limit sends SIGXCPU; a shell in between reports it as 128 + 24. */
const SIGXCPU_STATUS = 152;

export interface ProcessExit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  /** The last bytes the process wrote to stderr. */
  readonly stderr: string;
}

function lastLine(text: string): string {
  const lines = text.trim().split('\n');
  return (lines[lines.length - 1] ?? '').slice(0, 500);
}

/** Names why a sandbox process died during a call, as the typed error that call ends with. */
export function errorForExit(toolName: string, exit: ProcessExit, memoryMb: number): FleetError {
  if (exit.signal === 'SIGXCPU' || exit.code === SIGXCPU_STATUS) {
    return new ResourceLimitError(toolName, 'cpu', 'the sandbox process used up its CPU-time rlimit');
  }
  if (V8_OOM.test(exit.stderr)) {
    return new ResourceLimitError(toolName, 'memory', `the JavaScript heap outgrew its ${memoryMb} MiB`);
  }
  const how = exit.signal === null ? `exit code ${exit.code ?? 'unknown'}` : `signal ${exit.signal}`;
  const said = lastLine(exit.stderr);
  return new ExecutionFailedError(toolName, `its sandbox process ended (${how}) before answering${said === '' ? '' : `; its last words: ${said}`}`, {
    details: { sandboxExit: { code: exit.code, signal: exit.signal } },
  });
}

/** CPU time (user + system) in a `/proc/<pid>/stat` line, in seconds. */
export function cpuSecondsFromStat(stat: string, ticksPerSecond = 100): number | undefined {
  // The command name (field 2) may hold spaces and parentheses; count from the last ')'.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const user = Number(fields[11]);
  const system = Number(fields[12]);
  return Number.isFinite(user) && Number.isFinite(system) ? (user + system) / ticksPerSecond : undefined;
}
