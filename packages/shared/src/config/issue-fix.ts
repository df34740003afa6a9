import type { z } from 'zod';

/** A schema node's definition, as zod keeps it (`_zod.def`): what the walk below reads. */
type Def = Readonly<Record<string, unknown>> & { readonly type?: unknown };

const defOf = (node: unknown): Def | undefined => (node as { _zod?: { def?: Def } } | null | undefined)?._zod?.def;

/**
 * The field names of the object the schema expects at `path` (every object
 * it may be, through optional, default, pipe and union), or none when there
 * is no object there: what an unknown key at `path` is compared with, so that
 * `instance` gets "did you mean `instances`?" and a key is never offered a
 * field of another level of the file. Read from the schema itself, so it
 * cannot drift from it.
 */
export function fieldNamesAt(schema: z.ZodType, path: readonly PropertyKey[]): ReadonlySet<string> {
  let nodes = shapesOf([schema]);
  for (const step of path) nodes = shapesOf(nodes.flatMap((node) => childOf(node, step)));
  const names = new Set<string>();
  for (const node of nodes) {
    const def = defOf(node);
    if (def?.type === 'object') for (const name of Object.keys(def.shape as Record<string, unknown>)) names.add(name);
  }
  return names;
}

/** The objects, records, arrays and tuples `nodes` stand for, seen through wrappers and unions. */
function shapesOf(nodes: readonly unknown[]): unknown[] {
  const shapes: unknown[] = [];
  const seen = new Set<unknown>();
  const stack = [...nodes];
  while (stack.length > 0) {
    const node = stack.pop();
    if (seen.has(node)) continue;
    seen.add(node);
    const def = defOf(node);
    if (def === undefined) continue;
    if (def.type === 'object' || def.type === 'record' || def.type === 'array' || def.type === 'tuple') shapes.push(node);
    else if (Array.isArray(def.options)) stack.push(...(def.options as unknown[]));
    else if (def.type === 'intersection') stack.push(def.left, def.right);
    // A pipe's input is what the file holds; its output is what the code gets.
    else if (def.type === 'pipe') stack.push(def.in);
    else if (def.type === 'lazy' && typeof def.getter === 'function') stack.push((def.getter as () => unknown)());
    else if (def.innerType !== undefined) stack.push(def.innerType);
  }
  return shapes;
}

/** The schema of `step` inside the object, record, array or tuple `node`. */
function childOf(node: unknown, step: PropertyKey): unknown[] {
  const def = defOf(node);
  switch (def?.type) {
    case 'object': {
      const shape = def.shape as Record<string, unknown>;
      return typeof step === 'string' && Object.hasOwn(shape, step) ? [shape[step]] : [];
    }
    case 'record':
      return [def.valueType];
    case 'array':
      return typeof step === 'number' ? [def.element] : [];
    case 'tuple':
      return typeof step === 'number' ? [(def.items as unknown[])[step] ?? def.rest].filter((n) => n !== undefined && n !== null) : [];
    default:
      return [];
  }
}

/**
 * What to do about a schema's issue, said after the validator's own words
 * (`; did you mean "instances"?`, `; write 1`, `; add it`, `; write a whole
 * number`), or '' when its words already say it (a custom message).
 * @param schema the schema that raised the issue: an unknown key is compared with the fields of its own object only.
 */
export function issueFix(issue: z.core.$ZodIssue, schema: z.ZodType): string {
  switch (issue.code) {
    case 'unrecognized_keys': {
      const fields = fieldNamesAt(schema, issue.path);
      return `; ${issue.keys.map((key) => fixOfKey(key, fields)).join('; ')}`;
    }
    case 'invalid_value':
      return `; write ${issue.values.length === 1 ? JSON.stringify(issue.values[0]) : `one of ${issue.values.map((v) => JSON.stringify(v)).join(', ')}`}`;
    case 'invalid_type':
      if (/ received undefined$/.test(issue.message)) return '; add it';
      // 1e400 reads as Infinity: a number, but none the file could mean.
      if (/ received (Infinity|NaN)$/.test(issue.message)) return '; write a finite number';
      return Object.hasOwn(WRITE_TYPE, issue.expected) ? `; ${WRITE_TYPE[issue.expected]}` : '';
    case 'too_small':
    case 'too_big':
      return fixOfBound(issue);
    case 'invalid_union': {
      // One of several maps (`{ fromEnv }` or `{ fromFile }`): a key none of them has is named as for one map, when
      // it is a slip of the keyboard; else the union's own words ("must be a string, { fromEnv } or { fromFile }") say it.
      const keys = new Set(issue.errors.flat().flatMap((branch) => (branch.code === 'unrecognized_keys' ? branch.keys : [])));
      const fields = fieldNamesAt(schema, issue.path);
      // Keys of two maps at once (`{ fromEnv, fromFile }`): each is a field of its own map, so neither is a slip.
      const mixed = [...keys].filter((key) => fields.has(key)).sort();
      if (mixed.length > 1) return `; give one of ${mixed.map((key) => JSON.stringify(key)).join(' or ')}, not ${mixed.length === 2 ? 'both' : 'several'}`;
      const slips = [...keys].filter((key) => !fields.has(key)).map((key) => fixOfKey(key, fields)).filter((fix) => fix.startsWith('did you mean'));
      return slips.length === 0 ? '' : `; ${slips.join('; ')}`;
    }
    default:
      return '';
  }
}

/** What to write for a value of the wrong type, by the type the schema expects. */
const WRITE_TYPE: Readonly<Record<string, string>> = {
  object: 'write a map (key: value) here',
  record: 'write a map (key: value) here',
  array: 'write a list ([a, b]) here',
  tuple: 'write a list ([a, b]) here',
  string: 'write a string (in quotes if it looks like a number, true, false or null)',
  number: 'write a number (without quotes)',
  int: 'write a whole number',
  boolean: 'write true or false',
};

function fixOfBound(issue: z.core.$ZodIssueTooSmall | z.core.$ZodIssueTooBig): string {
  const small = issue.code === 'too_small';
  const bound = Number(small ? issue.minimum : issue.maximum);
  const exact = issue.exact === true;
  switch (issue.origin) {
    case 'number':
    case 'int':
    case 'bigint':
      if (exact) return `; write ${bound}`;
      return issue.inclusive === false ? `; write ${small ? 'more' : 'less'} than ${bound}` : `; write ${bound} or ${small ? 'more' : 'less'}`;
    case 'string': {
      const characters = `${bound} character${bound === 1 ? '' : 's'}`;
      if (exact) return `; write exactly ${characters}`;
      return small ? `; write at least ${characters}` : `; shorten it to at most ${characters}`;
    }
    case 'array':
    case 'set': {
      const items = `${bound} item${bound === 1 ? '' : 's'}`;
      return `; give ${exact ? 'exactly' : small ? 'at least' : 'at most'} ${items}`;
    }
    default:
      return '';
  }
}

function fixOfKey(key: string, fields: ReadonlySet<string>): string {
  // YAML 1.1's merge key: the files are YAML 1.2, where "<<" is a key like any other.
  if (key === '<<') return 'YAML merge keys ("<<") are not read: write the fields out, or give the alias as the whole value (key: *anchor)';
  // YAML reads `{max:2}` as the one key "max:2" (a flow map's ":" needs a space after it).
  const runOn = /^([^:\s]+):(\S.*)$/.exec(key);
  if (runOn?.[1] !== undefined && fields.has(runOn[1])) return `write "${runOn[1]}: ${runOn[2] ?? ''}", with a space after ":"`;
  let best: string | undefined;
  let bestDistance = Number.POSITIVE_INFINITY;
  for (const field of fields) {
    const d = field.toLowerCase() === key.toLowerCase() ? 0 : distance(key, field, 3);
    if (d < bestDistance) [best, bestDistance] = [field, d];
  }
  // A slip of the keyboard, not another word: one edit per three letters of the longer name, so
  // "x" is not "max" and "mix" may be "min", and two letters swapped count as one edit.
  const near = best !== undefined && bestDistance <= Math.floor(Math.max(key.length, best.length) / 3);
  return near ? `did you mean ${JSON.stringify(best)}?` : `remove ${JSON.stringify(key)}: it is not a field here`;
}

/**
 * Edit distance of `a` and `b` (insertions, deletions, substitutions and swaps
 * of two neighbouring letters, each one edit), or `cap + 1` once it is past `cap`.
 */
function distance(a: string, b: string, cap: number): number {
  if (Math.abs(a.length - b.length) > cap) return cap + 1;
  let before: number[] = [];
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    let smallest = i;
    for (let j = 1; j <= b.length; j++) {
      let value = Math.min((previous[j] ?? 0) + 1, (row[j - 1] ?? 0) + 1, (previous[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1));
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) value = Math.min(value, (before[j - 2] ?? 0) + 1);
      row.push(value);
      smallest = Math.min(smallest, value);
    }
    if (smallest > cap) return cap + 1;
    before = previous;
    previous = row;
  }
  return previous[b.length] ?? cap + 1;
}
