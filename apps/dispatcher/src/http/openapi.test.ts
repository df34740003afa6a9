import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registrationOnlyDeps } from '../../test/fixtures/registration-only-deps.js';
import { buildApp } from '../app.js';
import { CONSOLE_PATH } from '../console/console-routes.js';
import { buildOpenApiDocument } from './openapi.js';

const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const;

/** `/v1/calls/:id` → `/v1/calls/{id}`. */
const toTemplate = (url: string): string => url.replace(/:([A-Za-z0-9_]+)/g, '{$1}');

/** Resolves a local JSON Pointer (`#/a/b~1c`) in the document, or returns undefined. */
function resolvePointer(root: unknown, pointer: string): unknown {
  if (!pointer.startsWith('#/')) return undefined;
  let node: unknown = root;
  for (const raw of pointer.slice(2).split('/')) {
    const key = decodeURIComponent(raw).replace(/~1/g, '/').replace(/~0/g, '~');
    if (typeof node !== 'object' || node === null || !Object.hasOwn(node, key)) return undefined;
    node = (node as Record<string, unknown>)[key];
  }
  return node;
}

function collectRefs(node: unknown, found: string[] = []): string[] {
  if (Array.isArray(node)) for (const item of node) collectRefs(item, found);
  else if (typeof node === 'object' && node !== null) {
    for (const [key, value] of Object.entries(node)) {
      if (key === '$ref' && typeof value === 'string') found.push(value);
      else collectRefs(value, found);
    }
  }
  return found;
}

describe('OpenAPI document', () => {
  const document = buildOpenApiDocument();

  it('is an OpenAPI 3.1 document titled Forge Fleet, at the dispatcher version', () => {
    expect(document.openapi).toMatch(/^3\.1\.\d+$/);
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
    expect(document.info).toMatchObject({ title: 'Forge Fleet', version: pkg.version });
    expect(document.components.securitySchemes['bearerAuth']).toMatchObject({ type: 'http', scheme: 'bearer', bearerFormat: 'JWT' });
  });

  it('resolves every $ref within the document', () => {
    const refs = collectRefs(document);
    expect(refs.length).toBeGreaterThan(0);
    const dangling = refs.filter((ref) => resolvePointer(document, ref) === undefined);
    expect(dangling).toEqual([]);
  });

  it('keeps component schemas plain JSON Schema 2020-12 (no per-schema $schema or $id)', () => {
    for (const schema of Object.values(document.components.schemas)) {
      expect(schema).not.toHaveProperty('$schema');
      expect(schema).not.toHaveProperty('$id');
    }
  });

  it('gives every operation an id, responses, and a path parameter for each template variable', () => {
    const ids: string[] = [];
    for (const [path, item] of Object.entries(document.paths)) {
      const variables = [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]);
      for (const [method, operation] of Object.entries(item)) {
        expect(METHODS).toContain(method);
        expect(operation['responses'], `${method} ${path}`).toBeTypeOf('object');
        ids.push(String(operation['operationId']));
        const parameters = ((operation['parameters'] ?? []) as unknown[]).map((p) => {
          const ref = (p as { $ref?: string }).$ref;
          return (ref === undefined ? p : resolvePointer(document, ref)) as { name: string; in: string; required?: boolean };
        });
        const inPath = parameters.filter((p) => p.in === 'path');
        expect(inPath.map((p) => p.name).sort(), `${method} ${path}`).toEqual([...variables].sort());
        for (const p of inPath) expect(p.required).toBe(true);
      }
    }
    expect(new Set(ids).size).toBe(ids.length);
  });
});

describe('OpenAPI document and the app routes', () => {
  const app = buildApp(registrationOnlyDeps());
  const routes: string[] = [];
  // Added before the app loads its route modules (fastify registers plugins on ready()), so it sees every route.
  app.addHook('onRoute', (route) => {
    for (const method of [route.method].flat()) {
      // fastify answers HEAD for every GET route on its own (exposeHeadRoutes); the document lists the GET.
      if (method === 'HEAD') continue;
      // The web console's page and files are for people in a browser, not API operations: not in the document.
      if (route.url === CONSOLE_PATH || route.url.startsWith(`${CONSOLE_PATH}/`)) continue;
      routes.push(`${method} ${toTemplate(route.url)}`);
    }
  });

  beforeAll(async () => {
    await app.ready();
  });
  afterAll(async () => {
    await app.close();
  });

  it('lists every route of the app, and no route the app lacks', () => {
    const documented = Object.entries(buildOpenApiDocument().paths).flatMap(([path, item]) => Object.keys(item).map((method) => `${method.toUpperCase()} ${path}`));
    expect(routes.length).toBeGreaterThan(0);
    expect({ undocumented: routes.filter((r) => !documented.includes(r)).sort(), notInApp: documented.filter((d) => !routes.includes(d)).sort() }).toEqual({
      undocumented: [],
      notInApp: [],
    });
  });

  it('serves the document at GET /openapi.json without a token', async () => {
    const response = await app.inject({ method: 'GET', url: '/openapi.json' });
    expect(response.statusCode).toBe(200);
    expect(response.headers['content-type']).toMatch(/^application\/json/);
    expect(response.json()).toEqual(JSON.parse(JSON.stringify(buildOpenApiDocument())));
  });
});
