import { describe, expect, it } from 'vitest';
import { REDACTED, redactJson, redactSecrets } from './secret-value.js';

const S = 'SUPERSECRET_FROMFILE_9731';

describe('redactJson', () => {
  it('replaces a secret in strings and keys at any depth, including a value whose own key is a secret', () => {
    const answer = { a: S, nested: { [S]: { deep: S } }, [S]: [S, { z: S }], b: { [S]: S }, c: { [`x${S}y`]: `<${S}>` }, list: [[S]] };
    const out = redactJson(answer, [S]);
    expect(JSON.stringify(out)).not.toContain(S);
    expect(out).toEqual({
      a: REDACTED,
      nested: { [REDACTED]: { deep: REDACTED } },
      [REDACTED]: [REDACTED, { z: REDACTED }],
      b: { [REDACTED]: REDACTED },
      c: { [`x${REDACTED}y`]: `<${REDACTED}>` },
      list: [[REDACTED]],
    });
  });

  it('leaves a message with no secret as it was', () => {
    const answer = { a: 'plain', n: 1, k: { v: [true, null] } };
    expect(redactJson(structuredClone(answer), [S])).toEqual(answer);
    expect(redactSecrets('no secret here', [S])).toBe('no secret here');
  });
});
