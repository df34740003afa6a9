import { describe, expect, it } from 'vitest';
import { REDACTED, redactJson, redactSecrets, secretForms } from './secret-value.js';

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

describe('secretForms', () => {
  const find = (text: string, values: string[]): string => redactSecrets(text, secretForms(values));

  it('finds a value however a careless server printed it: as is, URL-encoded, or inside a JSON string of any common encoder', () => {
    const token = 'Tok"with\\back/slash+=-é<&>';
    // JavaScript's JSON.stringify, Python's json.dumps (ensure_ascii), Go's json.Marshal (HTML-safe), a query string.
    const python = '"Tok\\"with\\\\back/slash+=-\\u00e9<&>"';
    const go = '"Tok\\"with\\\\back/slash+=-é\\u003c\\u0026\\u003e"';
    // URL encoders: encodeURIComponent, Python's quote (keeps '/', encodes !'()*), lower-case hex, forms (+ for a space).
    const url = [encodeURIComponent(token), 'Tok%22with%5Cback/slash%2B%3D-%C3%A9%3C%26%3E', encodeURIComponent(token).replace(/%[0-9A-F]{2}/g, (e) => e.toLowerCase()), new URLSearchParams({ t: token }).toString()];
    for (const printed of [token, JSON.stringify({ t: token }), python, go, ...url.map((u) => `?t=${u}`)]) {
      const shown = find(printed, [token]);
      expect(shown, printed).toContain(REDACTED);
      expect(shown, printed).not.toContain('slash');
    }
  });

  it("finds a long part of a value on its own (a token after 'Bearer'), and looks for no value shorter than 4 characters", () => {
    expect(find('sent abcdefgh1234 alone', ['Bearer abcdefgh1234'])).toBe(`sent ${REDACTED} alone`);
    expect(find('a name of an ant', ['a', 'an'])).toBe('a name of an ant');
    expect(secretForms(['a', ''])).toEqual([]);
  });
});
