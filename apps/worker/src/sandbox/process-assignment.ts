/**
 * Which sandbox process a call may run in: the pool's policy, as pure
 * functions over what the pool knows of its processes (no processes, no
 * clocks, no I/O here), so every rule has a unit test.
 *
 * The invariant they keep: a process serves one *owner* for its whole life.
 * Under `caller` isolation the owner is the call's caller (its token subject),
 * so calls of different callers never share a process, at the same time or
 * later — a handler that hooks a global, poisons `Object.prototype` or keeps
 * module state reaches only its own caller's calls. Under `call` isolation
 * every call is an owner of its own and its process is retired with it.
 * A process nobody owns yet is a *spare*: it has never run a call.
 */
import { availableParallelism } from 'node:os';
import { parseConfig, ProcessIsolation } from '@forge-fleet/shared';
import { z } from 'zod';

/** How processes are given out. Parsed once, in {@link resolveAssignment}; the defaults live here only. */
export const AssignmentOptions = z.object({
  /** Who one process may serve. @defaultValue "caller" */
  isolation: ProcessIsolation.default('caller'),
  /**
   * Sandbox processes of this worker at most, spares included. Callers
   * beyond it wait for (or take over) the least recently used process of
   * another caller — they never share one — and every takeover is a process
   * start, so set it to the callers active at once on a worker (bench/README.md
   * measures the cliff). An idle process is ~55 MB resident: 64 are ~3.5 GB, a
   * seventh of a 2-core / 24 GiB machine; their CPU is only what their calls use.
   * @defaultValue 64
   */
  maxProcesses: z.number().int().positive().max(1024).default(64),
  /**
   * Processes one caller may hold: a caller with more calls in flight than
   * `callsPerProcess` gets another, up to this many (more processes than cores
   * buy no CPU, only memory). @defaultValue the machine's CPU count (at least 2)
   */
  processesPerCaller: z.number().int().positive().max(1024).default(() => Math.max(2, availableParallelism())),
  /** An owned process idle this long is stopped (spares are kept). @defaultValue 60000 */
  idleMs: z.number().int().positive().default(60_000),
});
export type AssignmentOptions = z.infer<typeof AssignmentOptions>;

/** @throws ConfigInvalidError naming each bad option. */
export function resolveAssignment(input: z.input<typeof AssignmentOptions>): Readonly<AssignmentOptions> {
  return parseConfig(AssignmentOptions, input, 'sandbox options');
}

/** The owner of every call without a caller (dev-mode anonymous calls, direct use of an executor): one caller. */
export const ANONYMOUS_OWNER = 'anonymous';

/**
 * The owner a call's process must have. Caller keys and per-call keys live
 * in separate name spaces, so no subject can pose as another owner. An empty
 * caller is anonymous, as the call signature reads it (`caller ?? ''`): the
 * two cannot be told apart by the signature, so they must not be by this.
 */
export function ownerOf(caller: string | undefined, isolation: ProcessIsolation, callSeq: () => number): string {
  if (isolation === 'call') return `call:${callSeq()}`;
  return caller === undefined || caller === '' ? ANONYMOUS_OWNER : `caller:${caller}`;
}

/** The isolation a tool's calls get: the stricter of the worker's and the tool's own. */
export function isolationFor(worker: ProcessIsolation, tool: ProcessIsolation | undefined): ProcessIsolation {
  return worker === 'call' || tool === 'call' ? 'call' : 'caller';
}

/** What the policy needs to know of one live process. */
export interface ProcessView {
  /** `undefined`: a spare, which has never run a call. */
  readonly owner: string | undefined;
  /** Calls running in it now. */
  readonly load: number;
  /** When it last took or ended a call (ms, any monotonic clock). */
  readonly lastUsedAt: number;
  /** Takes no new calls (retired, evicted, a per-call process in use); stops once idle. */
  readonly retiring: boolean;
}

export interface PickRules {
  /** Calls one process runs at once. */
  readonly perProcess: number;
  /** Processes one owner may hold. */
  readonly perOwner: number;
}

/**
 * Where a call of `owner` goes now: `run` in a process it owns (the one with
 * most room), `claim` a spare (it becomes the owner's for good), or `wait` —
 * for room in its own processes, or (`needsProcess`) for a process to be
 * made free. Never a process of another owner.
 */
export type Pick<P> = { readonly kind: 'run'; readonly process: P } | { readonly kind: 'claim'; readonly process: P } | { readonly kind: 'wait'; readonly needsProcess: boolean };

export function pickProcess<P extends ProcessView>(owner: string, processes: Iterable<P>, rules: PickRules): Pick<P> {
  let best: P | undefined;
  let spare: P | undefined;
  let owned = 0;
  for (const p of processes) {
    if (p.retiring) continue;
    if (p.owner === owner) {
      owned += 1;
      if (p.load < rules.perProcess && (best === undefined || p.load < best.load)) best = p;
    } else if (p.owner === undefined) {
      spare ??= p;
    }
  }
  if (best !== undefined) return { kind: 'run', process: best };
  if (owned >= rules.perOwner) return { kind: 'wait', needsProcess: false };
  return spare === undefined ? { kind: 'wait', needsProcess: true } : { kind: 'claim', process: spare };
}

export interface RoomNeeds {
  /** Waiting calls' owners that need a process of their own (after every spare was handed out). */
  readonly needed: number;
  /** Owners with calls waiting: their processes are taken over last. */
  readonly waiting: ReadonlySet<string>;
  /** Processes being started (each becomes a spare). */
  readonly starting: number;
  /** Spares to keep ready, so a new caller's first call does not wait for a start. */
  readonly warm: number;
  /** Processes at most, spares, starting and retiring ones included. */
  readonly cap: number;
}

/**
 * How to make room: processes to `start` (spares, for the owners in need and
 * to keep `warm` ready), and, at the cap, processes of other owners to
 * `evict` (idle: stop now) or `drain` (busy: take no new calls, stop once
 * idle) — least recently used first, idle ones before busy ones, owners
 * with calls waiting last, owners holding the most processes first. Draining
 * busy processes keeps a new caller from waiting for ever behind callers
 * that never leave their processes idle. Processes already retiring count
 * as room on its way.
 */
export function planRoom<P extends ProcessView>(processes: readonly P[], needs: RoomNeeds): { start: number; evict: P[]; drain: P[] } {
  let spares = 0;
  let retiring = 0;
  const held = new Map<string, number>();
  for (const p of processes) {
    if (p.retiring) retiring += 1;
    else if (p.owner === undefined) spares += 1;
    else held.set(p.owner, (held.get(p.owner) ?? 0) + 1);
  }
  const room = Math.max(0, needs.cap - processes.length - needs.starting);
  const start = Math.min(room, Math.max(0, needs.needed + needs.warm - spares - needs.starting));
  const shortfall = needs.needed - needs.starting - start - retiring;
  if (shortfall <= 0) return { start, evict: [], drain: [] };
  const candidates = processes.filter((p) => !p.retiring && p.owner !== undefined);
  const rank = (p: P): [number, number, number, number] => [p.load === 0 ? 0 : 1, needs.waiting.has(p.owner!) ? 1 : 0, -(held.get(p.owner!) ?? 0), p.lastUsedAt];
  candidates.sort((a, b) => {
    const [x, y] = [rank(a), rank(b)];
    for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return x[i]! - y[i]!;
    return 0;
  });
  const victims = candidates.slice(0, shortfall);
  return { start, evict: victims.filter((p) => p.load === 0), drain: victims.filter((p) => p.load > 0) };
}

/** Owned processes idle for `idleMs` or longer at `now`: they are stopped (spares are not). */
export function idleToReap<P extends ProcessView>(processes: Iterable<P>, now: number, idleMs: number): P[] {
  const found: P[] = [];
  for (const p of processes) if (!p.retiring && p.owner !== undefined && p.load === 0 && now - p.lastUsedAt >= idleMs) found.push(p);
  return found;
}
