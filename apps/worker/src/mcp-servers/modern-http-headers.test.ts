import { describe, expect, it } from 'vitest';
import { headerValue, paramHeadersOf, standardHeaders } from './modern-http-headers.js';

const base64 = (text: string): string => `=?base64?${Buffer.from(text, 'utf8').toString('base64')}?=`;

describe('headerValue', () => {
  it('passes plain printable ASCII as it is', () => {
    expect(headerValue('eu-west-1')).toBe('eu-west-1');
    expect(headerValue('a b\tc')).toBe('a b\tc');
  });

  it('sends as base64 what a header cannot carry or would change: other characters, edge blanks, empty, line ends, the sentinel itself', () => {
    for (const value of ['São Paulo', ' padded', 'trailing ', '', 'two\r\nlines', '=?base64?eA==?=', '東京', 'nul\u0000']) {
      expect(headerValue(value)).toBe(base64(value));
    }
  });
});

describe('standardHeaders', () => {
  it('names the revision and method of every request, and mirrors the name, URI or task a request is about', () => {
    expect(standardHeaders('2026-07-28', 'tools/list', {})).toEqual({ 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/list' });
    expect(standardHeaders('2026-07-28', 'tools/call', { name: 'add', arguments: {} })).toMatchObject({ 'mcp-name': 'add' });
    expect(standardHeaders('2026-07-28', 'prompts/get', { name: 'greet' })).toMatchObject({ 'mcp-name': 'greet' });
    expect(standardHeaders('2026-07-28', 'resources/read', { uri: 'file:///ü.txt' })).toMatchObject({ 'mcp-name': base64('file:///ü.txt') });
    expect(standardHeaders('2026-07-28', 'tasks/get', { taskId: 't-1' })).toMatchObject({ 'mcp-name': 't-1' });
  });

  it('sends no name for a method off the table (inherited names included) or a name that is not a string', () => {
    expect(standardHeaders('2026-07-28', 'constructor', { name: 'x' })).not.toHaveProperty('mcp-name');
    expect(standardHeaders('2026-07-28', 'tools/call', { name: 7 })).not.toHaveProperty('mcp-name');
    expect(standardHeaders('2026-07-28', 'tools/call', undefined)).not.toHaveProperty('mcp-name');
  });

  it("sends a tools/call's declared arguments as Mcp-Param headers, primitives only, omitting what is absent or null", () => {
    const declared = [
      { path: ['region'], name: 'Region' },
      { path: ['opts', 'dry'], name: 'Dry-Run' },
      { path: ['count'], name: 'Count' },
      { path: ['gone'], name: 'Gone' },
      { path: ['nothing'], name: 'Nothing' },
      { path: ['deep'], name: 'Deep' },
    ];
    const headers = standardHeaders('2026-07-28', 'tools/call', { name: 't', arguments: { region: 'Zürich', opts: { dry: false }, count: 3, nothing: null, deep: { a: 1 } } }, declared);
    expect(headers).toEqual({ 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/call', 'mcp-name': 't', 'mcp-param-region': base64('Zürich'), 'mcp-param-dry-run': 'false', 'mcp-param-count': '3' });
    // Only a tools/call carries them; an unsafe integer is not sent rounded.
    expect(standardHeaders('2026-07-28', 'prompts/get', { name: 't', arguments: { region: 'x' } }, declared)).not.toHaveProperty('mcp-param-region');
    expect(standardHeaders('2026-07-28', 'tools/call', { name: 't', arguments: { count: 2 ** 60 } }, declared)).not.toHaveProperty('mcp-param-count');
  });
});

describe('paramHeadersOf', () => {
  it('finds the primitive properties declared with x-mcp-header, nested through properties alone', () => {
    const schema = {
      type: 'object',
      properties: {
        region: { type: 'string', 'x-mcp-header': 'Region' },
        opts: { type: 'object', properties: { dry: { type: 'boolean', 'x-mcp-header': 'Dry' }, n: { type: 'integer', 'x-mcp-header': 'N' } } },
        plain: { type: 'string' },
      },
    };
    expect(paramHeadersOf(schema)).toEqual([
      { path: ['region'], name: 'Region' },
      { path: ['opts', 'dry'], name: 'Dry' },
      { path: ['opts', 'n'], name: 'N' },
    ]);
  });

  it('ignores what the revision does not allow: numbers, objects, names that are not header tokens, a name used twice, declarations under items or anyOf', () => {
    const schema = {
      type: 'object',
      properties: {
        ratio: { type: 'number', 'x-mcp-header': 'Ratio' },
        obj: { type: 'object', 'x-mcp-header': 'Obj' },
        spaced: { type: 'string', 'x-mcp-header': 'Has Space' },
        crlf: { type: 'string', 'x-mcp-header': 'A\r\nX-Injected: 1' },
        first: { type: 'string', 'x-mcp-header': 'Same' },
        second: { type: 'string', 'x-mcp-header': 'same' },
        list: { type: 'array', items: { type: 'object', properties: { x: { type: 'string', 'x-mcp-header': 'X' } } } },
        either: { anyOf: [{ type: 'string', 'x-mcp-header': 'Y' }] },
      },
    };
    expect(paramHeadersOf(schema)).toEqual([{ path: ['first'], name: 'Same' }]);
    for (const odd of [undefined, null, 'schema', [], { properties: [] }, { properties: { a: null } }]) expect(paramHeadersOf(odd)).toEqual([]);
  });

  it('does not walk a schema nested past 32 levels: a hostile one of a million levels is not a stack overflow', () => {
    let deep: Record<string, unknown> = { type: 'string', 'x-mcp-header': 'Deep' };
    for (let i = 0; i < 1_000_000; i += 1) deep = { type: 'object', properties: { p: deep } };
    expect(paramHeadersOf(deep)).toEqual([]);
    let shallow: Record<string, unknown> = { type: 'string', 'x-mcp-header': 'Shallow' };
    for (let i = 0; i < 31; i += 1) shallow = { type: 'object', properties: { p: shallow } };
    expect(paramHeadersOf(shallow)).toEqual([{ path: Array.from({ length: 31 }, () => 'p'), name: 'Shallow' }]);
  });
});
