import { SUPPORTED_PROTOCOL_VERSIONS } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { answeredRevision, refusedRevisions, revisionRefusal, UNSUPPORTED_PROTOCOL_VERSION } from './upstream-instance.js';

describe('refusedRevisions', () => {
  it("takes the revisions from an UnsupportedProtocolVersion error's data", () => {
    expect(refusedRevisions(UNSUPPORTED_PROTOCOL_VERSION, { supported: ['2026-07-28'], requested: '2025-11-25' })).toEqual(['2026-07-28']);
  });

  it('keeps only strings shaped like revisions, so nothing else a server sent reaches a message', () => {
    expect(refusedRevisions(UNSUPPORTED_PROTOCOL_VERSION, { supported: ['2026-07-28', 'Bearer sk-live-123', 7, null, '2026-07-28\nforged'] })).toEqual(['2026-07-28']);
    expect(refusedRevisions(UNSUPPORTED_PROTOCOL_VERSION, { supported: 'everything' })).toEqual([]);
    expect(refusedRevisions(UNSUPPORTED_PROTOCOL_VERSION, undefined)).toEqual([]);
  });

  it("takes them from a 2025-era server's InvalidParams refusal, which carries the same data", () => {
    expect(refusedRevisions(-32602, { supported: ['2024-11-05'], requested: '2025-11-25' })).toEqual(['2024-11-05']);
    // InvalidParams without that data is some other complaint about the request.
    expect(refusedRevisions(-32602, undefined)).toBeUndefined();
    expect(refusedRevisions(-32602, { reason: 'bad clientInfo' })).toBeUndefined();
  });

  it('is undefined for every other error code', () => {
    expect(refusedRevisions(-32601, { supported: ['2026-07-28'] })).toBeUndefined();
    expect(refusedRevisions('-32022', { supported: ['2026-07-28'] })).toBeUndefined();
    expect(refusedRevisions(undefined, undefined)).toBeUndefined();
  });
});

describe('answeredRevision', () => {
  it("names the revision a server answered initialize with, and the worker's", () => {
    const text = answeredRevision(new Error("Server's protocol version is not supported: 1999-01-01"));
    expect(text).toContain('it answered initialize with MCP 1999-01-01');
    expect(text).toContain(`${SUPPORTED_PROTOCOL_VERSIONS.join(', ')}, 2026-07-28 here`);
  });

  it('repeats nothing of an answer that is no revision, and is undefined for other failures', () => {
    expect(answeredRevision(new Error("Server's protocol version is not supported: Bearer sk-live-123"))).toContain('a revision that is no MCP revision');
    expect(answeredRevision(new Error("Server's protocol version is not supported: Bearer sk-live-123"))).not.toContain('sk-live');
    expect(answeredRevision(new Error('Connection closed'))).toBeUndefined();
    expect(answeredRevision('a string')).toBeUndefined();
  });
});

describe('revisionRefusal', () => {
  it("names the server's revisions, the worker's, and the fix", () => {
    const text = revisionRefusal(['2026-07-28']);
    expect(text).toContain('it speaks only MCP 2026-07-28');
    expect(text).toContain(SUPPORTED_PROTOCOL_VERSIONS.join(', '));
    expect(text).toContain("legacy: 'reject'");
  });

  it('names the revisions the worker speaks, the bridged 2026-07-28 among them, or those it is told', () => {
    const text = revisionRefusal(['2027-01-01']);
    expect(text).toContain('it speaks only MCP 2027-01-01');
    expect(text).toContain(`${SUPPORTED_PROTOCOL_VERSIONS.join(', ')}, 2026-07-28 here`);
    expect(revisionRefusal(['2027-01-01'], ['2025-11-25'])).toContain('speaks 2025-11-25 here');
  });

  it('says so when the server named no revision', () => {
    expect(revisionRefusal([])).toContain('it speaks none of the revisions the worker speaks');
  });
});
