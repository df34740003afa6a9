import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type ApprovalContext, defineTool } from '@forge-fleet/shared';
import { describe, expect, it } from 'vitest';
import { approvalDeadlineOf, approvalHandlerOf, loadPolicyFile, policyFromEnv } from './policy-file.js';

const dir = mkdtempSync(join(tmpdir(), 'forge-policy-'));
const file = (name: string, text: string): string => {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
};
const call = (name: string) => ({ id: 'c1', name, arguments: {} });
const ctx = (name: string): ApprovalContext => ({ definition: defineTool({ name, tier: 'platform', handler: () => 'x' }).definition, trust: 'trusted' });

describe('policy files', () => {
  it('reads YAML and JSON alike, with defaults for what they leave out', () => {
    const yaml = loadPolicyFile(file('p.yaml', 'version: 1\napproval:\n  people: [refund]\nscopes:\n  research: ["search.*", clock]\n'));
    expect(yaml.policy).toMatchObject({ approval: { default: 'tier', people: ['refund'], deadlineMs: 900_000, deadlines: {} }, scopes: { research: ['search.*', 'clock'] }, defaultScope: ['*'] });
    expect(yaml.source).toMatch(/p\.yaml$/);
    const json = loadPolicyFile(file('p.json', JSON.stringify({ version: 1, approval: { default: 'deny' } })));
    expect(json.policy.approval.default).toBe('deny');
  });

  it('names the line and path of every problem', () => {
    const path = file('bad.yaml', 'version: 1\napproval:\n  default: sometimes\n  people: ["bad pattern!"]\nextra: true\n');
    let message = '';
    try {
      loadPolicyFile(path);
    } catch (error) {
      message = (error as Error).message;
      expect(error).toMatchObject({ code: 'CONFIG_INVALID' });
    }
    expect(message).toMatch(/bad\.yaml:3:\d+: approval\.default/);
    expect(message).toMatch(/bad\.yaml:4:\d+: approval\.people\.0: tool pattern "bad pattern!" is not an exact tool name, "prefix\.\*" or "\*"/);
    expect(message).toMatch(/extra/);
    expect(() => loadPolicyFile(file('syntax.yaml', 'version: 1\nscopes: [unclosed\n'))).toThrow(/syntax\.yaml:\d+:\d+/);
    expect(() => loadPolicyFile(join(dir, 'missing.yaml'))).toThrow(/FORGE_POLICY_FILE: cannot read .*missing\.yaml: ENOENT.*; set FORGE_POLICY_FILE to a policy file the dispatcher can read$/);
    expect(() => loadPolicyFile(file('empty.yaml', ''))).toThrow(/empty\.yaml: the file is empty; it needs at least `version: 1`/);
    expect(() => loadPolicyFile(file('comments.yaml', '# later\n'))).toThrow(/comments\.yaml: the file is empty/);
    // A key JavaScript objects drop (it sets the prototype) is refused where it is, not lost.
    expect(() => loadPolicyFile(file('proto.yaml', 'version: 1\nscopes:\n  research: [clock]\n  __proto__: ["*"]\n'))).toThrow(/proto\.yaml:4:3: scopes\.__proto__: `__proto__` cannot be a name/);
    // Aliases of aliases expand exponentially ("billion laughs"): refused as CONFIG_INVALID at the file's first alias.
    expect(() => loadPolicyFile(file('laughs.yaml', 'version: 1\na: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: [*d, *d, *d, *d, *d, *d, *d, *d, *d]\n'))).toThrow(
      expect.objectContaining({ code: 'CONFIG_INVALID', message: expect.stringMatching(/laughs\.yaml:3:8: the file expands its aliases \(\*name\) too often/) as string }),
    );
  });

  it('reads a .json file as strict JSON: what only YAML allows, and duplicate keys, are refused with file:line:col', () => {
    // YAML reads the trailing comma without a word (and would have widened nothing here, but a typo elsewhere could).
    expect(() => loadPolicyFile(file('comma.json', '{"version": 1, "approval": {"default": "deny",}}'))).toThrow(
      expect.objectContaining({ code: 'CONFIG_INVALID', message: expect.stringMatching(/comma\.json:1:47: a trailing comma before "}": remove it; a \.json file is read as strict JSON/) as string }),
    );
    // JSON.parse would keep the last: "auto" would silently replace "deny".
    expect(() => loadPolicyFile(file('dup.json', '{"version": 1, "approval": {"default": "deny", "default": "auto"}}'))).toThrow(/dup\.json:1:48: key "default" appears twice in one object/);
    expect(() => loadPolicyFile(file('proto.json', '{"version": 1, "scopes": {"__proto__": ["*"]}}'))).toThrow(/proto\.json:1:27: scopes\.__proto__: `__proto__` cannot be a name/);
    expect(() => loadPolicyFile(file('shape.json', '{\n  "version": 1,\n  "approval": { "default": "sometimes" }\n}'))).toThrow(/shape\.json:3:28: approval\.default/);
    expect(() => loadPolicyFile(file('empty.json', ''))).toThrow(/empty\.json: the file is empty/);
  });

  it('says what to change as a servers file does: at the key, from its own object, in words of the file (found by QA)', () => {
    const refusal = (name: string, text: string): string[] => {
      try {
        loadPolicyFile(file(name, text));
      } catch (error) {
        expect(error).toMatchObject({ code: 'CONFIG_INVALID' });
        return (error as { details: { problems: string[] } }).details.problems;
      }
      throw new Error(`${name} loaded, but a problem was expected`);
    };
    // An unknown key is pointed at where it is, and "did you mean" names only a field of its own object.
    expect(refusal('top.yaml', 'version: 1\nalow: [clock]\n')).toEqual([expect.stringMatching(/top\.yaml:2:1: \(root\): Unrecognized key: "alow"; remove "alow": it is not a field here$/) as string]);
    expect(refusal('deep.yaml', 'version: 1\napproval:\n  alow: [clock]\n')).toEqual([expect.stringMatching(/deep\.yaml:3:3: approval: Unrecognized key: "alow"; did you mean "allow"\?$/) as string]);
    expect(refusal('case.yaml', 'version: 1\ndefaultscope: ["*"]\n')).toEqual([expect.stringMatching(/case\.yaml:2:1: \(root\): Unrecognized key: "defaultscope"; did you mean "defaultScope"\?$/) as string]);
    // A key's own problem is said at the key, with what to change.
    expect(refusal('key.yaml', 'version: 1\nscopes: { "": [clock] }\n')).toEqual([expect.stringMatching(/key\.yaml:2:11: scopes\."": key: Too small: expected string to have >=1 characters; write at least 1 character$/) as string]);
    expect(refusal('shape.yaml', 'version: 1\nscopes: [clock]\napproval:\n  deadlineMs: -5\n')).toEqual([
      expect.stringMatching(/shape\.yaml:4:15: approval\.deadlineMs: Too small: expected number to be >0; write more than 0$/) as string,
      expect.stringMatching(/shape\.yaml:2:9: scopes: Invalid input: expected record, received array; write a map \(key: value\) here$/) as string,
    ]);
    // Two YAML documents, and the parser's other words, say what to change.
    const two = refusal('two.yaml', 'version: 1\n---\nversion: 1\n');
    expect(two).toEqual([expect.stringMatching(/two\.yaml:2:1: the file holds more than one YAML document, a second one starting here; keep one: remove this "---" line/) as string]);
    expect(two[0]).not.toMatch(/parseAllDocuments/);
    expect(refusal('tab.yaml', 'version: 1\napproval:\n\tdefault: auto\n')).toEqual([expect.stringMatching(/tab\.yaml:3:1: Tabs are not allowed as indentation; indent with spaces$/) as string]);
  });

  it('builds the approval step: default handler, allow list, then people', async () => {
    const { policy } = loadPolicyFile(file('a.yaml', 'version: 1\napproval:\n  default: auto\n  allow: ["pay.*", clock]\n  people: ["pay.refund"]\n'));
    const handler = approvalHandlerOf(policy);
    expect(await handler.check(call('clock'), 'platform', ctx('clock'))).toMatchObject({ kind: 'approve' });
    expect(await handler.check(call('pay.refund'), 'host', ctx('pay.refund'))).toMatchObject({ kind: 'pending', reason: expect.stringContaining('person') as string });
    expect(await handler.check(call('shell'), 'platform', ctx('shell'))).toMatchObject({ kind: 'deny' });
  });

  it('finds a tool\'s approval deadline, and where it came from: exact name, then pattern, then the tool\'s own, then the default', () => {
    const { policy } = loadPolicyFile(file('d.yaml', 'version: 1\napproval:\n  deadlineMs: 1000\n  deadlines: { "pay.*": 2000, pay.refund: 3000 }\n'));
    const deadline = approvalDeadlineOf(policy);
    expect([deadline('pay.refund'), deadline('pay.charge'), deadline('clock')]).toEqual([
      { ms: 3000, from: { from: 'policy', entry: 'pay.refund' } },
      { ms: 2000, from: { from: 'policy', entry: 'pay.*' } },
      { ms: 1000, from: { from: 'default' } },
    ]);
    // A tool's own deadline (its definition's approvalDeadlineMs, from an MCP servers file) comes after the policy's for it, before the default.
    expect([deadline('pay.refund', 9000), deadline('pay.charge', 9000), deadline('clock', 9000), deadline('clock', undefined)]).toEqual([
      { ms: 3000, from: { from: 'policy', entry: 'pay.refund' } },
      { ms: 2000, from: { from: 'policy', entry: 'pay.*' } },
      { ms: 9000, from: { from: 'tool' } },
      { ms: 1000, from: { from: 'default' } },
    ]);
  });

  it('describes the environment\'s settings as a policy when no file is given', () => {
    expect(policyFromEnv({ approval: 'auto', scopes: { r: ['a'] }, defaultScope: ['*'], approvalDeadlineMs: 5 })).toMatchObject({ source: 'environment', policy: { approval: { default: 'auto', deadlineMs: 5 }, scopes: { r: ['a'] } } });
    // parseDispatcherEnv refuses these first; should one get here, it is CONFIG_INVALID naming the variable, not a ZodError.
    expect(() => policyFromEnv({ approval: 'tier', scopes: { r: ['a', 'bar_*'] }, defaultScope: ['x*'], approvalDeadlineMs: 5 })).toThrow(
      expect.objectContaining({ code: 'CONFIG_INVALID', message: expect.stringMatching(/FORGE_SCOPES\.r\.1: tool pattern "bar_\*" .*; FORGE_DEFAULT_SCOPE\.0: tool pattern "x\*"/) as string }),
    );
  });
});
