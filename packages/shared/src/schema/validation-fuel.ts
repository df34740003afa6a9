/**
 * The meters of one validation, read by the code ajv generates: how often it
 * follows a schema's `$ref`s, and how many problems (ajv's error objects) it
 * makes.
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
 * Both counts are the same for the same schema and value every time, so the
 * answer is too.
 */

import { eachJsonValue } from '../wire/json-walk.js';

/** Calls to a schema's compiled ref targets any validation may make. */
export const REF_CALLS_BASE = 1024;
/** Further calls allowed per value in the data. */
export const REF_CALLS_PER_NODE = 4;

/** Problems (ajv's error objects, those of failed branches included) any validation may make. */
export const PROBLEMS_BASE = 10_000;
/** Further problems allowed per value in the data. */
export const PROBLEMS_PER_NODE = 32;
/** Most problems one validation may make, whatever its data: each is an object held until the validation ends. */
export const PROBLEMS_MAX = 100_000;

/** A validation made more problems than its allowance: validation ends, and compile.ts answers the issue. */
export class ProblemsExceeded extends Error {
  constructor(readonly limit: number) {
    super(`the validation made more than ${limit} problems`);
    this.name = 'ProblemsExceeded';
  }
}

/** A validation followed refs past its allowance: validation ends, and compile.ts answers the issue. */
export class RefCallsExceeded extends Error {
  constructor(readonly limit: number) {
    super(`the schema's $refs were followed more than ${limit} times`);
    this.name = 'RefCallsExceeded';
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

/**
 * The meters the generated code decrements, reached as `self.forgeFuel`
 * (ajv passes each generated function its instance as `self`). Outside a
 * metered validation (ajv checking a schema against its meta-schema) they
 * never run out. The data is counted only once a validation has spent a
 * meter's base, so most validations never walk it.
 */
class ValidationFuel {
  /** Ref calls the validation may still make. */
  left = Infinity;
  /** Problems the validation may still make. */
  problemsLeft = Infinity;
  #data: unknown;
  #values: number | undefined;
  /** Each meter's whole allowance, once the data has been counted. */
  #refLimit: number | undefined;
  #problemLimit: number | undefined;

  run<T>(data: unknown, validate: () => T): T {
    if (this.left !== Infinity) return validate();
    this.left = REF_CALLS_BASE;
    this.problemsLeft = PROBLEMS_BASE;
    this.#data = data;
    this.#values = undefined;
    this.#refLimit = undefined;
    this.#problemLimit = undefined;
    try {
      return validate();
    } finally {
      this.left = Infinity;
      this.problemsLeft = Infinity;
      this.#data = undefined;
    }
  }

  #valuesOfData(): number {
    this.#values ??= valuesIn(this.#data);
    return this.#values;
  }

  /** Called by the generated code when the calls so far are spent. */
  refill(): void {
    if (this.#refLimit !== undefined) throw new RefCallsExceeded(this.#refLimit);
    this.#refLimit = REF_CALLS_BASE + REF_CALLS_PER_NODE * this.#valuesOfData();
    this.left += this.#refLimit - REF_CALLS_BASE;
    if (this.left < 0) throw new RefCallsExceeded(this.#refLimit);
  }

  /** Called by the generated code when the problems so far are spent. */
  refillProblems(): void {
    if (this.#problemLimit !== undefined) throw new ProblemsExceeded(this.#problemLimit);
    this.#problemLimit = Math.min(PROBLEMS_MAX, PROBLEMS_BASE + PROBLEMS_PER_NODE * this.#valuesOfData());
    this.problemsLeft += this.#problemLimit - PROBLEMS_BASE;
    if (this.problemsLeft < 0) throw new ProblemsExceeded(this.#problemLimit);
  }
}

const fuel = new ValidationFuel();

/** Runs `validate` (one validation of `data`) on fresh allowances of ref calls and problems. */
export function withValidationFuel<T>(data: unknown, validate: () => T): T {
  return fuel.run(data, validate);
}

/** The instance property the generated code reads the meter from; set on each metered ajv instance. */
export const FUEL_PROPERTY = 'forgeFuel';

/** Gives an ajv instance the meter its generated code reads. */
export function fuelInstance(ajv: object): void {
  Object.defineProperty(ajv, FUEL_PROPERTY, { value: fuel });
}

// Every function ajv generates opens with this signature (draft-07's lacks `dynamicAnchors`).
const ENTRY = /return function \w+\(data, \{.*?\}=\{\}\)\{/;

// ajv counts each problem it makes with this statement, right after adding the error object (lib/compile/errors.ts).
const PROBLEM = /\berrors\+\+;/g;

/**
 * ajv's `code.process`: makes the generated validator spend one call of the
 * meter on entry, and one problem of the allowance with each error object it
 * makes. A validator of another shape is refused at compile time (a change of
 * ajv would show in every schema test), never run unmetered.
 */
export function meterValidation(sourceCode: string): string {
  const entry = ENTRY.exec(sourceCode);
  if (entry === null) throw new Error('the schema compiler generated a validator the fleet cannot meter (an ajv upgrade?)');
  const at = entry.index + entry[0].length;
  const body = sourceCode.slice(at).replace(PROBLEM, `errors++;if(--self.${FUEL_PROPERTY}.problemsLeft<0)self.${FUEL_PROPERTY}.refillProblems();`);
  return `${sourceCode.slice(0, at)}if(--self.${FUEL_PROPERTY}.left<0)self.${FUEL_PROPERTY}.refill();${body}`;
}
