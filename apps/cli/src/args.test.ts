import { describe, expect, it } from 'vitest';
import { callIdArgument, jsonObjectArgument, listOption, parseCommandArgs, requiredOption, secondsOption, UsageError } from './args.js';

const spec = { wait: { type: 'boolean' }, id: { type: 'string' }, help: { type: 'boolean', short: 'h' } } as const;
const parse = (argv: string[], arity: [number, number] = [1, 2]) => parseCommandArgs(argv, spec, arity, 'forge call', 'usage: forge call …');

describe('command-line arguments', () => {
  it('reads options anywhere among the positional arguments', () => {
    expect(parse(['echo', '--wait', '{"n":1}', '--id', 'c-1'])).toEqual({ values: { wait: true, id: 'c-1' }, positionals: ['echo', '{"n":1}'] });
  });

  it('refuses unknown options, options without their value, and too many or too few positional arguments, as usage errors with the usage', () => {
    for (const argv of [['echo', '--bogus'], ['echo', '--id'], ['echo', '{}', 'more'], []]) {
      let caught: unknown;
      try {
        parse(argv);
      } catch (error) {
        caught = error;
      }
      expect(caught, argv.join(' ')).toBeInstanceOf(UsageError);
      expect(caught).toMatchObject({ code: 'CONFIG_INVALID', command: 'forge call', usage: 'usage: forge call …' });
    }
  });

  it('accepts --help whatever else is missing', () => {
    expect(parse(['-h'], [2, 2]).values['help']).toBe(true);
  });

  it('parses a JSON object argument, and says what is wrong with anything else', () => {
    expect(jsonObjectArgument('{"n": 1, "deep": {"a": [1]}}', 'arguments', 'forge call', '')).toEqual({ n: 1, deep: { a: [1] } });
    expect(() => jsonObjectArgument('{n: 1}', 'arguments', 'forge call', '')).toThrow(/arguments are not valid JSON \(.+\); pass one JSON object in single quotes/);
    expect(() => jsonObjectArgument('[1, 2]', 'arguments', 'forge call', '')).toThrow(/must be a JSON object.*not an array/);
    expect(() => jsonObjectArgument('null', 'arguments', 'forge call', '')).toThrow(/not null/);
    expect(() => jsonObjectArgument('42', 'arguments', 'forge call', '')).toThrow(/not a number/);
  });

  it('checks call ids as the API does', () => {
    expect(callIdArgument('step-7:a.b', 'forge call', '')).toBe('step-7:a.b');
    expect(() => callIdArgument('no spaces', 'forge call', '')).toThrow(UsageError);
    expect(() => callIdArgument('x'.repeat(129), 'forge call', '')).toThrow(UsageError);
  });

  it('reads seconds as milliseconds, refusing zero, negatives and words', () => {
    const secondsOf = (text: string) => secondsOption({ values: { timeout: text }, positionals: [] }, 'timeout', 'forge call', '');
    expect(secondsOf('30')).toBe(30_000);
    expect(secondsOf('0.25')).toBe(250);
    for (const bad of ['0', '-1', 'soon', '', 'Infinity']) expect(() => secondsOf(bad), bad).toThrow(/--timeout must be a positive number of seconds/);
    expect(secondsOption({ values: {}, positionals: [] }, 'timeout', 'forge call', '')).toBeUndefined();
  });

  it('reads required and list options', () => {
    const args = { values: { grant: ' a, b.* ,,', reason: '' }, positionals: [] };
    expect(listOption(args, 'grant')).toEqual(['a', 'b.*']);
    // Given more than once: every one counts.
    expect(listOption({ values: { grant: ['a, b.*', 'c'] }, positionals: [] }, 'grant')).toEqual(['a', 'b.*', 'c']);
    expect(listOption(args, 'scope')).toBeUndefined();
    expect(() => requiredOption(args, 'reason', 'forge approvals deny', '')).toThrow(/--reason is required/);
  });
});
