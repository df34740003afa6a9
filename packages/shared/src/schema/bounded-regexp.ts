import { MessageChannel, type MessagePort, Worker } from 'node:worker_threads';

/**
 * Most time one validation may spend, in all, on patterns that only the
 * built-in (backtracking) engine reads. Such patterns answer ordinary values
 * in microseconds; one that backtracks past this on a value is stopped.
 */
export const PATTERN_BUDGET_MS = 100;

/** How long the pattern thread may take to start (once per process, and again after one is stopped). */
const START_LIMIT_MS = 10_000;

/** A pattern was stopped on a value: validation ends, and compile.ts answers the issue. */
export class PatternTooSlow extends Error {
  constructor(readonly pattern: string) {
    super(`pattern ${JSON.stringify(pattern)} ran past ${PATTERN_BUDGET_MS} ms`);
    this.name = 'PatternTooSlow';
  }
}

// The slots of the shared state: the exchange's step, the answer, and whether the thread has started.
const STEP = 0;
const ANSWER = 1;
const READY = 2;
const IDLE = 0;
const ASKED = 1;
const ANSWERED = 2;
const MATCH = 1;
const FAILED = 2;

// The thread never returns to its event loop: it sleeps on the shared step until asked, takes the question off
// its port synchronously, and answers in the shared state. Compiled patterns are kept, a few hundred at most.
const THREAD = `
const { workerData, receiveMessageOnPort } = require('node:worker_threads');
const { port, state } = workerData;
const compiled = new Map();
Atomics.store(state, ${READY}, 1);
Atomics.notify(state, ${READY});
for (;;) {
  const step = Atomics.load(state, ${STEP});
  if (step !== ${ASKED}) { Atomics.wait(state, ${STEP}, step); continue; }
  const { pattern, flags, value } = receiveMessageOnPort(port).message;
  let answer = ${FAILED};
  try {
    const key = flags + '/' + pattern;
    let re = compiled.get(key);
    if (re === undefined) {
      if (compiled.size >= 256) compiled.clear();
      re = new RegExp(pattern, flags);
      compiled.set(key, re);
    }
    answer = re.test(value) ? ${MATCH} : 0;
  } catch {}
  Atomics.store(state, ${ANSWER}, answer);
  Atomics.store(state, ${STEP}, ${ANSWERED});
  Atomics.notify(state, ${STEP});
}`;

interface PatternThread {
  readonly worker: Worker;
  readonly port: MessagePort;
  readonly state: Int32Array;
}

let thread: PatternThread | undefined;
// Inside a validation (withPatternBudget); its deadline is set at its first bounded test, so a validation that
// makes none (most) does not even read the clock.
let inBudget = false;
let deadline: number | undefined;

function startThread(): PatternThread {
  const { port1, port2 } = new MessageChannel();
  const state = new Int32Array(new SharedArrayBuffer(3 * Int32Array.BYTES_PER_ELEMENT));
  const worker = new Worker(THREAD, { eval: true, workerData: { port: port2, state }, transferList: [port2] });
  // Neither may hold the process open; a thread that fails is started again at the next question.
  worker.unref();
  port1.unref();
  worker.on('error', () => undefined);
  worker.on('exit', () => {
    if (thread?.worker === worker) thread = undefined;
  });
  Atomics.wait(state, READY, 0, START_LIMIT_MS);
  if (Atomics.load(state, READY) !== 1) {
    worker.terminate().catch(() => undefined);
    throw new Error(`the pattern thread did not start within ${START_LIMIT_MS} ms`);
  }
  return { worker, port: port1, state };
}

/**
 * Runs `run` (one validation) with one {@link PATTERN_BUDGET_MS} for all the
 * bounded tests it makes. A test outside any budget has one of its own.
 */
export function withPatternBudget<T>(run: () => T): T {
  if (inBudget) return run();
  inBudget = true;
  try {
    return run();
  } finally {
    inBudget = false;
    deadline = undefined;
  }
}

/**
 * `new RegExp(pattern, flags).test(value)`, run on a thread of its own while
 * this one waits for at most the time left in the budget. A backtracking
 * engine cannot be interrupted from its own thread, and the dispatcher checks
 * arguments on its only one: here a test past the budget stops the pattern
 * thread (a new one starts at the next question) and throws
 * {@link PatternTooSlow}. Waiting blocks this thread, as running the pattern
 * here would, but never for longer than the budget.
 */
export function boundedTest(pattern: string, flags: string, value: string): boolean {
  // Started before the budget's clock is read: starting the thread is not the pattern's time.
  const t = (thread ??= startThread());
  const now = performance.now();
  if (inBudget) deadline ??= now + PATTERN_BUDGET_MS;
  const limit = deadline === undefined ? PATTERN_BUDGET_MS : deadline - now;
  if (limit <= 0) throw new PatternTooSlow(pattern);
  t.port.postMessage({ pattern, flags, value });
  Atomics.store(t.state, STEP, ASKED);
  Atomics.notify(t.state, STEP);
  Atomics.wait(t.state, STEP, ASKED, limit);
  if (Atomics.load(t.state, STEP) !== ANSWERED) {
    thread = undefined;
    t.worker.terminate().catch(() => undefined);
    throw new PatternTooSlow(pattern);
  }
  const answer = Atomics.load(t.state, ANSWER);
  Atomics.store(t.state, STEP, IDLE);
  // The pattern compiled on this thread before it was asked for; failing there is the engine's own limit
  // (a stack overflow on a huge value), which compile.ts answers as one.
  if (answer === FAILED) throw new RangeError(`pattern ${JSON.stringify(pattern)} failed on the value`);
  return answer === MATCH;
}
