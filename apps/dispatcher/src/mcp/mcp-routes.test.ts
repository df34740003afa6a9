import { parseToolDefinition, type ToolDefinition, type ToolDefinitionInput, ToolScope } from '@forge-fleet/shared';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ErrorCode, McpError, type Tool } from '@modelcontextprotocol/sdk/types.js';
import { fastify, type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DecisionAudit } from '../audit/decisions.js';
import type { Authenticator, Caller } from '../auth/authenticator.js';
import type { CatalogView } from '../catalog/catalog-view.js';
import type { CallService } from '../pipeline/call-service.js';
import { type McpDeps, mcpRoutes } from './mcp-routes.js';
import { annotationsOf, listPage } from './tool-listing.js';
import { McpProtocolError } from './protocol-error.js';

const define = (input: ToolDefinitionInput): ToolDefinition => parseToolDefinition(input);

// Out of order on purpose: listings are sorted by name.
const TOOLS = ['kilo', 'alpha', 'echo', 'delta', 'bravo', 'charlie', 'juliet'].map((name) => define({ name, tier: 'platform' }));

describe('listPage', () => {
  it('pages through every tool once, in name order, with an opaque cursor', () => {
    const names: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const page = listPage(TOOLS, cursor, 3);
      expect(page.tools.length).toBeLessThanOrEqual(3);
      names.push(...page.tools.map((t) => t.name));
      cursor = page.nextCursor;
      pages += 1;
    } while (cursor !== undefined);
    expect(names).toEqual(['alpha', 'bravo', 'charlie', 'delta', 'echo', 'juliet', 'kilo']);
    expect(pages).toBe(3);
  });

  it('continues after the last name seen when a tool left between pages', () => {
    const first = listPage(TOOLS, undefined, 2);
    expect(first.tools.map((t) => t.name)).toEqual(['alpha', 'bravo']);
    const second = listPage(TOOLS.filter((t) => t.name !== 'alpha'), first.nextCursor, 2);
    expect(second.tools.map((t) => t.name)).toEqual(['charlie', 'delta']);
  });

  it('ends without a cursor on an exactly full last page', () => {
    expect(listPage(TOOLS.slice(0, 2), undefined, 2).nextCursor).toBeUndefined();
  });

  it('refuses a cursor it did not make (-32602)', () => {
    expect(() => listPage(TOOLS, '!!not-a-cursor', 2)).toThrow(McpProtocolError);
    expect(() => listPage(TOOLS, '', 2)).toThrow(expect.objectContaining({ code: ErrorCode.InvalidParams }));
  });
});

describe('annotationsOf', () => {
  it('derives the hints from tier and flags', () => {
    expect(annotationsOf(define({ name: 'p', tier: 'platform' }))).toEqual({ readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false });
    expect(annotationsOf(define({ name: 'e', tier: 'embedded', retryable: true }))).toEqual({ readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false });
    expect(annotationsOf(define({ name: 'h', tier: 'host' }))).toEqual({ readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true });
    expect(annotationsOf(define({ name: 'r', tier: 'host', speculatable: true }))).toEqual({ readOnlyHint: true, destructiveHint: false, idempotentHint: false, openWorldHint: true });
    expect(annotationsOf(define({ name: 'c', tier: 'platform', requiresConfirmation: true }))).toMatchObject({ destructiveHint: true });
  });

  it("keeps an MCP server's own hint only where it is the more careful, and its title", () => {
    const claims = { title: 'Wipe', readOnlyHint: true, destructiveHint: true, idempotentHint: false, openWorldHint: true };
    // The server says read-only; the fleet does not vouch for it (not speculatable): not read-only.
    expect(annotationsOf(define({ name: 's', tier: 'platform', retryable: true, annotations: claims }))).toEqual({ title: 'Wipe', readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true });
    // A server's relaxed claims never loosen what the fleet derives.
    const relaxed = { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false };
    expect(annotationsOf(define({ name: 'h2', tier: 'host', annotations: relaxed }))).toEqual({ readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true });
    expect(annotationsOf(define({ name: 'r2', tier: 'platform', speculatable: true, annotations: { readOnlyHint: false } }))).toMatchObject({ readOnlyHint: false });
  });

  it('never lists a tool read-only that its annotations call destructive', () => {
    // readOnlyHint absent: MCP's default (false) is the server's word, and the destructive claim wins over `speculatable`.
    expect(annotationsOf(define({ name: 'd', tier: 'platform', speculatable: true, annotations: { destructiveHint: true } }))).toEqual({ readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true });
    // A server that says both is taken at its more careful word.
    expect(annotationsOf(define({ name: 'd2', tier: 'host', speculatable: true, annotations: { readOnlyHint: true, destructiveHint: true } }))).toMatchObject({ readOnlyHint: false, destructiveHint: true });
  });

  it("takes MCP's defaults for hints absent from a definition's annotations, and lists the more careful of each", () => {
    // `{}`: the server claimed nothing, so MCP's defaults (not read-only, destructive, not idempotent, open world) stand.
    expect(annotationsOf(define({ name: 'u', tier: 'platform', speculatable: true, retryable: true, annotations: {} }))).toEqual({ readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true });
    // Read-only where both say so; destructiveHint then means nothing (MCP: meaningful only when not read-only) and is false.
    expect(annotationsOf(define({ name: 'ro', tier: 'platform', speculatable: true, annotations: { readOnlyHint: true } }))).toEqual({ readOnlyHint: true, destructiveHint: false, idempotentHint: false, openWorldHint: true });
    // Idempotent only where both say so; closed world only where both say so.
    expect(annotationsOf(define({ name: 'i', tier: 'embedded', retryable: true, annotations: { idempotentHint: true, openWorldHint: false, destructiveHint: false } }))).toEqual({ readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false });
    expect(annotationsOf(define({ name: 'i2', tier: 'embedded', annotations: { idempotentHint: true, openWorldHint: false, destructiveHint: false } }))).toMatchObject({ idempotentHint: false });
    // An author's annotations count as a server's do.
    expect(annotationsOf(define({ name: 'a', tier: 'platform', requiresConfirmation: true, annotations: { destructiveHint: false, openWorldHint: false } }))).toMatchObject({ destructiveHint: true, openWorldHint: false });
  });
});

describe('/mcp with the official client (stubbed catalog, page size 2)', () => {
  const caller: Caller = { subject: 'unit', role: 'agent', scope: { name: 'unit', scope: ToolScope.allow(['*']) }, authorization: undefined };
  const listed: string[] = [];
  const deps: McpDeps = {
    catalog: { list: () => TOOLS } as unknown as CatalogView,
    auth: {
      caller: (headers: { authorization?: string }) => (headers.authorization === 'Bearer ok' ? Promise.resolve(caller) : Promise.reject(new Error('no'))),
    } as unknown as Authenticator,
    audit: { listed: (_caller: Caller, route: string) => listed.push(route) } as unknown as DecisionAudit,
    calls: {} as CallService,
  };
  let app: FastifyInstance;
  let url: string;

  beforeAll(async () => {
    app = fastify();
    await app.register(mcpRoutes(deps, { pageSize: 2 }));
    url = await app.listen({ port: 0, host: '127.0.0.1' });
  });
  afterAll(async () => {
    await app.close();
  });

  it('lists all tools over several pages, once each and in order', async () => {
    const client = new Client({ name: 'unit', version: '0.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`), { requestInit: { headers: { authorization: 'Bearer ok' } } }));
    try {
      const tools: Tool[] = [];
      let cursor: string | undefined;
      let pages = 0;
      do {
        const page = await client.listTools(cursor === undefined ? {} : { cursor });
        expect(page.tools.length).toBeLessThanOrEqual(2);
        tools.push(...page.tools);
        cursor = page.nextCursor;
        pages += 1;
      } while (cursor !== undefined);
      expect(tools.map((t) => t.name)).toEqual(['alpha', 'bravo', 'charlie', 'delta', 'echo', 'juliet', 'kilo']);
      expect(pages).toBe(4);
      expect(listed).toEqual(Array.from({ length: 4 }, () => 'POST /mcp tools/list'));
      const error = await client.listTools({ cursor: 'bogus!' }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(McpError);
      expect((error as McpError).code).toBe(ErrorCode.InvalidParams);
      // The client puts "MCP error -32602: " before the message it reads; the wire message must not carry it already.
      expect((error as McpError).message).toBe('MCP error -32602: invalid cursor: pass the nextCursor of the previous tools/list answer, or none for the first page');
    } finally {
      await client.close();
    }
  });
});
