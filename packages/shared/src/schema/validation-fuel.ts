/**
 * The meters of one validation, read by the code ajv generates: how often it
 * follows a schema's `$ref`s, how many problems (ajv's error objects) it
 * makes, and how much of the generated code it runs.
 *
 * **Ref calls.** A schema's refs can reach one subschema by exponentially many
 * paths: a chain of 40 `anyOf`s, each over two refs to the one before it, is a
 * 40-line schema that ajv evaluates 2^40 times on any value (measured: 2.8 s
 * at 20). A ref that recurses into the value does the same with a 30-level
 * argument. An MCP server's list is untrusted, and the dispatcher validates on
 * its one event loop, so no schema and argument may cost that.
 *
 * ajv compiles every ref target that has refs of its own, or more than 8
 * keywords (compile.ts), as a function of its own, and inlines the rest
 * (which have no refs, so cost at most their size per value). Each such
 * function's entry is metered here: a validation may make
 * {@link REF_CALLS_BASE} calls, plus {@link REF_CALLS_PER_NODE} for each value
 * in the data (each item, member and scalar). A recursive schema for a tree or
 * a JSON value makes one or two per value, and a schema without recursion a
 * bounded number whatever the value; only fan-in that multiplies runs out.
 *
 * **Problems.** Each failed check makes an error object, also inside an
 * `anyOf` branch that is then dropped: an `anyOf` of 1,990 object branches over
 * 40,000 empty objects (a 120 KB argument) made 80 million of them, and the
 * process validating it ran out of heap (4 GB) and died. A validation may make
 * {@link PROBLEMS_BASE} problems, plus {@link PROBLEMS_PER_NODE} per value in
 * the data, and never more than {@link PROBLEMS_MAX}: a union of 30 object
 * variants makes 29 per item that matches the last, and an item holds a few
 * values; the hostile union above is stopped after 100,000 (about 20 MB).
 *
 * **Work.** A schema is bounded in size (schema-size.ts), a value too, but
 * their product is not: an `allOf` of 1,990 `{ "type": "object" }` checks each
 * of 40,000 items against all of them, 80 million checks that all pass (5.5 s
 * of a dispatcher's loop, no problem made: a function that large runs
 * unoptimised, at about 70 ns a check). Every check the generated code makes
 * (each `if`, generated-code.ts) spends one unit of work. A validation may
 * spend {@link WORK_BASE} units plus {@link WORK_PER_NODE} per value in the
 * data, never more than {@link WORK_MAX} (a third of a second at that pace;
 * ordinary schemas run at a few nanoseconds a check). An item checked against
 * a schema of 200 optional properties costs 200 checks, however few it holds.
 *
 * Every count is the same for the same schema and value every time, so the
 * answer is too.
 */

import { eachJsonValue } from '../wire/json-walk.js';
import { scanGenerated } from './generated-code.js';

/** Calls to a schema's compiled ref targets any validation may make. */
export const REF_CALLS_BASE = 1024;
/** Further calls allowed per value in the data. */
export const REF_CALLS_PER_NODE = 64;

/** Problems (ajv's error objects, those of failed branches included) any validation may make. */
export const PROBLEMS_BASE = 10_000;
/** Further problems allowed per value in the data. */
export const PROBLEMS_PER_NODE = 32;
/** Most problems one validation may make, whatever its data: each is an object held until the validation ends. */
export const PROBLEMS_MAX = 100_000;

/** Checks of the generated code any validation may make. */
export const WORK_BASE = 1_000_000;
/** Further checks allowed per value in the data. */
export const WORK_PER_NODE = 64;
/** Most checks one validation may make, whatever its data. */
export const WORK_MAX = 5_000_000;

/** Which allowance a validation ran out of. */
export type FuelKind = 'refs' | 'problems' | 'work';

/** A validation ran out of an allowance: validation ends, and compile.ts answers the issue. */
export class FuelExhausted extends Error {
  constructor(
    readonly kind: FuelKind,
    readonly limit: number,
  ) {
    super(`the validation ran out of its allowance of ${kind} (${limit})`);
    this.name = 'FuelExhausted';
  }
}

/** How many values `data` holds, itself included. */
function valuesIn(data: unknown): number {
  let count = 0;
  eachJsonValue(data, () => {
    count += 1;
    return true;
  });
  return count;
}

/** One allowance: a base any validation has, grown by the data's size the first time the base is spent. */
class Allowance {
  /** What the validation may still spend; the generated code decrements it. */
  left = Infinity;
  #limit: number | undefined;

  constructor(
    readonly kind: FuelKind,
    private readonly base: number,
    private readonly perNode: number,
    private readonly max: number,
  ) {}

  start(): void {
    this.left = this.base;
    this.#limit = undefined;
  }

  stop(): void {
    this.left = Infinity;
  }

  /** Called when `left` went below zero. @throws FuelExhausted once the allowance for the data is spent too. */
  refill(values: () => number): void {
    if (this.#limit !== undefined) throw new FuelExhausted(this.kind, this.#limit);
    this.#limit = Math.min(this.max, this.base + this.perNode * values());
    this.left += this.#limit - this.base;
    if (this.left < 0) throw new FuelExhausted(this.kind, this.#limit);
  }
}

/**
 * The meters the generated code decrements, reached as `self.forgeFuel`
 * (ajv passes each generated function its instance as `self`). Outside a
 * metered validation (ajv checking a schema against its meta-schema) they
 * never run out. The data is counted only once a validation has spent a
 * base, so most validations never walk it.
 */
class ValidationFuel {
  readonly refs = new Allowance('refs', REF_CALLS_BASE, REF_CALLS_PER_NODE, Infinity);
  readonly problems = new Allowance('problems', PROBLEMS_BASE, PROBLEMS_PER_NODE, PROBLEMS_MAX);
  readonly work = new Allowance('work', WORK_BASE, WORK_PER_NODE, WORK_MAX);
  #data: unknown;
  #values: number | undefined;
  #running = false;
  readonly #countValues = (): number => (this.#values ??= valuesIn(this.#data));

  run<T>(data: unknown, validate: () => T): T {
    if (this.#running) return validate();
    this.#running = true;
    this.#data = data;
    this.#values = undefined;
    this.refs.start();
    this.problems.start();
    this.work.start();
    try {
      return validate();
    } finally {
      this.#running = false;
      this.#data = undefined;
      this.refs.stop();
      this.problems.stop();
      this.work.stop();
    }
  }

  /** Called by the generated code when an allowance went below zero. */
  refill(allowance: Allowance): void {
    allowance.refill(this.#countValues);
  }
}

const fuel = new ValidationFuel();

/** Runs `validate` (one validation of `data`) on fresh allowances. */
export function withValidationFuel<T>(data: unknown, validate: () => T): T {
  return fuel.run(data, validate);
}

/** The instance property the generated code reads the meters from; set on each metered ajv instance. */
export const FUEL_PROPERTY = 'forgeFuel';

/** Gives an ajv instance the meters its generated code reads. */
export function fuelInstance(ajv: object): void {
  Object.defineProperty(ajv, FUEL_PROPERTY, { value: fuel });
}

// Every function ajv generates opens with this signature (draft-07's lacks `dynamicAnchors`).
const ENTRY = /return function \w+\(data, \{.*?\}=\{\}\)\{/;

/** The statement that spends `amount` of one allowance. */
const spend = (allowance: FuelKind, amount: number): string => {
  const meter = `self.${FUEL_PROPERTY}`;
  return `if((${meter}.${allowance}.left-=${amount})<0)${meter}.refill(${meter}.${allowance});`;
};

// Locals of each generated function (no name ajv gives starts with `forge`): the work allowance, and the checks made
// since the function last spent them.
const WORK = 'forgeWork';
const CHECKS = 'forgeChecks';

/**
 * ajv's `code.process`: makes the generated validator spend one ref call on
 * entry, one problem with each error object, and one unit of work with each
 * check it makes (each `if`, generated-code.ts). Checks are counted in a local
 * (a register, where a shared meter cost a check ten times its time) and spent
 * at the top of each pass through a loop and before each return: between two
 * of those the code runs straight, at most once through each check. A
 * validator of another shape is refused at compile time (a change of ajv
 * would show in every schema test), never run unmetered.
 */
export function meterValidation(sourceCode: string): string {
  const entry = ENTRY.exec(sourceCode);
  if (entry === null) throw new Error('the schema compiler generated a validator the fleet cannot meter (an ajv upgrade?)');
  const bodyOpen = entry.index + entry[0].length - 1;
  let code;
  try {
    code = scanGenerated(sourceCode, bodyOpen);
  } catch (err) {
    throw new Error(`the schema compiler generated a validator the fleet cannot meter (an ajv upgrade?): ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  }
  const meter = `self.${FUEL_PROPERTY}`;
  const spendChecks = `if((${WORK}.left-=${CHECKS})<0)${meter}.refill(${WORK});${CHECKS}=0;`;
  // Each edit: at an offset, how many characters of the source it replaces, and with what.
  const edits = [
    ...code.checks.map((at) => ({ at, cut: 3, text: `if((${CHECKS}++),` })),
    ...code.loops.map((at) => ({ at: at + 1, cut: 0, text: spendChecks })),
    ...code.returns.map((at) => ({ at, cut: 0, text: spendChecks })),
    ...code.problems.map((at) => ({ at, cut: 0, text: spend('problems', 1) })),
  ].sort((a, b) => a.at - b.at || a.cut - b.cut); // at one offset (a loop's block opening on a check), the insertion first
  const parts: string[] = [];
  let from = bodyOpen + 1;
  for (const edit of edits) {
    parts.push(sourceCode.slice(from, edit.at), edit.text);
    from = edit.at + edit.cut;
  }
  parts.push(sourceCode.slice(from));
  return `${sourceCode.slice(0, bodyOpen + 1)}const ${WORK}=${meter}.work;let ${CHECKS}=0;${spend('refs', 1)}${parts.join('')}`;
}
