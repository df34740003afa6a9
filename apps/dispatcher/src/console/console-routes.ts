import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { InternalError } from '@forge-fleet/shared';
import type { FastifyInstance, FastifyReply } from 'fastify';

/**
 * Where the web console is served. Its pages are for people, not API
 * operations: they are outside `/v1` and the OpenAPI document.
 */
export const CONSOLE_PATH = '/ui';

/**
 * The console's files, a fixed list: a request path never reaches the file
 * system, so there is no traversal to guard against.
 */
const FILES = {
  'index.html': 'text/html; charset=utf-8',
  // Module scripts are refused by browsers unless served with a JavaScript MIME type.
  'console.js': 'text/javascript; charset=utf-8',
  'console.css': 'text/css; charset=utf-8',
  'favicon.svg': 'image/svg+xml',
} as const;

/**
 * The files sit outside src/ (tsc emits only compiled TypeScript, it copies
 * nothing), in the package's `console/` folder. This module is two levels below
 * the package root both as src/console/console-routes.ts (run from source) and
 * as dist/console/console-routes.js (built), so one relative URL serves both.
 */
const STATIC_DIR = new URL('../../console/', import.meta.url);

/**
 * Sent with every console file. The page holds a bearer token in
 * sessionStorage: scripts, styles and fetches from this origin only, no
 * framing (clickjacking the Approve button) and no MIME sniffing keep other
 * content from reaching it.
 */
const SECURITY_HEADERS = {
  'content-security-policy': "default-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'; object-src 'none'",
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  // Small files: revalidate on each load so a new dispatcher version is picked up at once.
  'cache-control': 'no-cache',
} as const;

interface ConsoleFile {
  readonly type: string;
  readonly body: Buffer;
}

/**
 * Reads the console's files once, so a dispatcher whose package lacks them
 * fails at start rather than on an operator's first visit.
 *
 * @throws InternalError naming the folder when a file is missing.
 */
function loadFiles(dir: URL): ReadonlyMap<string, ConsoleFile> {
  const files = new Map<string, ConsoleFile>();
  for (const [name, type] of Object.entries(FILES)) {
    try {
      files.set(name, { type, body: readFileSync(new URL(name, dir)) });
    } catch (error) {
      throw new InternalError(`the web console's file '${name}' could not be read from ${fileURLToPath(dir)}; the dispatcher package ships it in console/ beside src/ and dist/`, { cause: error });
    }
  }
  return files;
}

/**
 * `GET /ui`: the web console, a static page for operators and approvers that
 * calls the `/v1` API with the token a person enters (see docs/http-api.md).
 *
 * @param dir the folder holding the files. @defaultValue the package's `console/` folder
 * @throws InternalError when one of the files cannot be read (at registration, not per request).
 */
export function consoleRoutes(dir: URL = STATIC_DIR) {
  const files = loadFiles(dir);
  const serve = (reply: FastifyReply, name: string): void => {
    const file = files.get(name);
    if (file === undefined) reply.callNotFound();
    else void reply.headers(SECURITY_HEADERS).type(file.type).send(file.body);
  };
  return (app: FastifyInstance): void => {
    app.get(CONSOLE_PATH, (_request, reply) => serve(reply, 'index.html'));
    app.get<{ Params: { file: string } }>(`${CONSOLE_PATH}/:file`, (request, reply) => serve(reply, request.params.file === '' ? 'index.html' : request.params.file));
  };
}
