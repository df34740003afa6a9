import { readFileSync } from 'node:fs';
import { fastify, type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registerErrorHandling } from '../http/errors.js';
import { CONSOLE_PATH, consoleRoutes } from './console-routes.js';

const STATIC_DIR = new URL('../../console/', import.meta.url);

describe('web console routes', () => {
  let app: FastifyInstance;
  beforeAll(async () => {
    app = fastify();
    registerErrorHandling(app, 1024);
    await app.register(consoleRoutes());
    await app.ready();
  });
  afterAll(() => app.close());

  it('serves the page at /ui and /ui/ with a same-origin-only CSP and no framing', async () => {
    for (const url of [CONSOLE_PATH, `${CONSOLE_PATH}/`, `${CONSOLE_PATH}/index.html`]) {
      const response = await app.inject({ method: 'GET', url });
      expect(response.statusCode, url).toBe(200);
      expect(response.headers['content-type']).toBe('text/html; charset=utf-8');
      expect(response.headers['content-security-policy']).toMatch(/^default-src 'self';/);
      expect(response.headers['content-security-policy']).toContain("frame-ancestors 'none'");
      expect(response.headers['x-frame-options']).toBe('DENY');
      expect(response.headers['x-content-type-options']).toBe('nosniff');
      expect(response.body).toContain('<script type="module" src="/ui/console.js"></script>');
    }
  });

  it('serves every file the page references, with its content type', async () => {
    const html = readFileSync(new URL('index.html', STATIC_DIR), 'utf8');
    const referenced = [...html.matchAll(/(?:src|href)="(\/ui\/[^"]+)"/g)].map((m) => m[1]!);
    expect(referenced.sort()).toEqual(['/ui/console.css', '/ui/console.js', '/ui/favicon.svg']);
    const types: Record<string, string> = { js: 'text/javascript; charset=utf-8', css: 'text/css; charset=utf-8', svg: 'image/svg+xml' };
    for (const url of referenced) {
      const response = await app.inject({ method: 'GET', url });
      expect(response.statusCode, url).toBe(200);
      expect(response.headers['content-type'], url).toBe(types[url.split('.').pop()!]);
      expect(response.headers['content-security-policy'], url).toBeDefined();
    }
  });

  it('answers anything else under /ui with the API not-found error, never a file from disk', async () => {
    for (const url of [`${CONSOLE_PATH}/package.json`, `${CONSOLE_PATH}/..%2Fpackage.json`, `${CONSOLE_PATH}/%2e%2e%2fsrc%2fmain.ts`, `${CONSOLE_PATH}/__proto__`]) {
      const response = await app.inject({ method: 'GET', url });
      expect(response.statusCode, url).toBe(404);
      expect(response.json(), url).toMatchObject({ error: { code: 'ROUTE_NOT_FOUND' } });
    }
  });

  it('refuses to start without its files, naming the folder', () => {
    expect(() => consoleRoutes(new URL('file:///nonexistent-forge-console/'))).toThrow(
      expect.objectContaining({ code: 'INTERNAL', message: expect.stringContaining('/nonexistent-forge-console') as string }),
    );
  });

  it('keeps the page within its CSP and renders API data as text only', () => {
    const html = readFileSync(new URL('index.html', STATIC_DIR), 'utf8');
    // Inline scripts, inline styles and style attributes would be blocked by `default-src 'self'`.
    expect(html).not.toMatch(/<script(?![^>]*\ssrc=)[^>]*>/);
    expect(html).not.toMatch(/<style|\sstyle=/);
    const script = readFileSync(new URL('console.js', STATIC_DIR), 'utf8');
    expect(script).not.toMatch(/innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function/);
  });
});
