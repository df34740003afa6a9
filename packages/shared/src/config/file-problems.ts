import type { z } from 'zod';
import { issueFix } from './issue-fix.js';

/** Where the parts of a parsed configuration file are: what `YamlSource` and `JsonSource` both give. */
export interface FilePositions {
  where(path: readonly PropertyKey[], options?: { readonly key?: boolean }): string;
}

/**
 * One problem of a configuration file as its loaders all say it:
 * `file:line:col: dotted.path: message`. With `key`, the position is the
 * last step's key rather than its value; `at` points elsewhere than `path`
 * (an unknown key inside the object at `path`).
 */
export function problemAt(source: FilePositions, path: readonly PropertyKey[], message: string, options: { readonly key?: boolean; readonly at?: readonly PropertyKey[] } = {}): string {
  // An empty key would vanish from the dotted path ("scopes."): it is shown as written, "".
  const dotted = path.length === 0 ? '(root)' : path.map((step) => (step === '' ? '""' : String(step))).join('.');
  return `${source.where(options.at ?? path, { key: options.key === true })}: ${dotted}: ${message}`;
}

/**
 * Each of `schema`'s issues with a file, as {@link problemAt} says it, with
 * what to change after the validator's words (see `issueFix`). A problem
 * of a key (an unknown key, a key its record refuses) points at the key:
 * the value beside it is not what is wrong. One function for every
 * configuration file, so that the servers file and the policy file say
 * their mistakes alike.
 */
export function schemaProblems(schema: z.ZodType, issues: readonly z.core.$ZodIssue[], source: FilePositions): string[] {
  return tightestBounds(issues).map((issue) => {
    if (issue.code === 'invalid_key') {
      const reasons = issue.issues.map((i) => `${i.message}${issueFix(i, schema)}`).join('; ');
      // A rule's own words ("must be …") read on from "key"; the validator's ("Too small: …") follow a colon.
      return problemAt(source, issue.path, /^[A-Z]/.test(reasons) ? `key: ${reasons}` : `key ${reasons}`, { key: true });
    }
    const message = `${issue.message}${issueFix(issue, schema)}`;
    if (issue.code === 'unrecognized_keys' && issue.keys[0] !== undefined) return problemAt(source, issue.path, message, { key: true, at: [...issue.path, issue.keys[0]] });
    return problemAt(source, issue.path, message);
  });
}

/**
 * `issues` without a bound another issue of the same value makes tighter: a
 * whole number past 2^53 breaks both its field's maximum and the safe-integer
 * one, and "write 9007199254740991 or less" beside "write 600000 or less"
 * would tell the reader to write a value the file refuses.
 */
function tightestBounds(issues: readonly z.core.$ZodIssue[]): z.core.$ZodIssue[] {
  const bound = (i: z.core.$ZodIssue): number | undefined => (i.code === 'too_big' ? Number(i.maximum) : i.code === 'too_small' ? Number(i.minimum) : undefined);
  const at = (i: z.core.$ZodIssue): string => JSON.stringify(i.path.map(String));
  return issues.filter((issue) => {
    const mine = bound(issue);
    if (mine === undefined) return true;
    return !issues.some((other) => {
      const theirs = bound(other);
      if (other === issue || other.code !== issue.code || theirs === undefined || at(other) !== at(issue)) return false;
      return issue.code === 'too_big' ? theirs < mine : theirs > mine;
    });
  });
}
