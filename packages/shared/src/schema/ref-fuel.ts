/**
 * The bound on how often one validation follows a schema's `$ref`s.
 *
 * A schema's refs can reach one subschema by exponentially many paths: a
 * chain of 40 `anyOf`s, each over two refs to the one before it, is a 40-line
 * schema that ajv evaluates 2^40 times on any value (measured: 2.8 s at 20).
 * A ref that recurses into the value does the same with a 30-level argument.
 * An MCP server's list is untrusted, and the dispatcher validates on its one
 * event loop, so no schema and argument may cost that.
 *
 * ajv compiles every ref target that has refs of its own, or more than 8
 * keywords (compile.ts), as a function of its own, and inlines the rest
 * (which have no refs, so cost at most their size per value). Each such function's entry is metered here: a validation may
 * make {@link REF_CALLS_BASE} calls, plus {@link REF_CALLS_PER_NODE} for each
 * value in the data (each item, member and scalar). A recursive schema for a
 * tree or a JSON value makes one or two per value, and a schema without
 * recursion a bounded number whatever the value; only fan-in that multiplies
 * runs out. The count is the same for the same schema and value every time,
 * so the answer is too.
 */

import { eachJsonValue } from '../wire/json-walk.js';

/** Calls to a schema's compiled ref targets any validation may make. */
export const REF_CALLS_BASE = 1024;
/** Further calls allowed per value in the data. */
export const REF_CALLS_PER_NODE = 4;

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
 * The meter the generated code decrements, reached as `self.forgeRefFuel`
 * (ajv passes each generated function its instance as `self`). Outside a
 * metered validation (ajv checking a schema against its meta-schema) it never
 * runs out. The data is counted only once a validation has made
 * {@link REF_CALLS_BASE} calls, so most validations never walk it.
 */
class RefFuel {
  left = Infinity;
  #data: unknown;
  /** The validation's whole allowance, once its data has been counted. */
  #limit: number | undefined;

  run<T>(data: unknown, validate: () => T): T {
    if (this.left !== Infinity) return validate();
    this.left = REF_CALLS_BASE;
    this.#data = data;
    this.#limit = undefined;
    try {
      return validate();
    } finally {
      this.left = Infinity;
      this.#data = undefined;
    }
  }

  /** Called by the generated code when the calls so far are spent. */
  refill(): void {
    if (this.#limit !== undefined) throw new RefCallsExceeded(this.#limit);
    this.#limit = REF_CALLS_BASE + REF_CALLS_PER_NODE * valuesIn(this.#data);
    this.left += this.#limit - REF_CALLS_BASE;
    if (this.left < 0) throw new RefCallsExceeded(this.#limit);
  }
}

const fuel = new RefFuel();

/** Runs `validate` (one validation of `data`) on a fresh allowance of ref calls. */
export function withRefFuel<T>(data: unknown, validate: () => T): T {
  return fuel.run(data, validate);
}

/** The instance property the generated code reads the meter from; set on each metered ajv instance. */
export const FUEL_PROPERTY = 'forgeRefFuel';

/** Gives an ajv instance the meter its generated code reads. */
export function fuelInstance(ajv: object): void {
  Object.defineProperty(ajv, FUEL_PROPERTY, { value: fuel });
}

// Every function ajv generates opens with this signature (draft-07's lacks `dynamicAnchors`).
const ENTRY = /return function \w+\(data, \{.*?\}=\{\}\)\{/;

/**
 * ajv's `code.process`: makes the generated validator spend one call of the
 * meter on entry. A validator of another shape is refused at compile time (a
 * change of ajv would show in every schema test), never run unmetered.
 */
export function meterRefCalls(sourceCode: string): string {
  const entry = ENTRY.exec(sourceCode);
  if (entry === null) throw new Error('the schema compiler generated a validator the fleet cannot meter (an ajv upgrade?)');
  const at = entry.index + entry[0].length;
  return `${sourceCode.slice(0, at)}if(--self.${FUEL_PROPERTY}.left<0)self.${FUEL_PROPERTY}.refill();${sourceCode.slice(at)}`;
}
