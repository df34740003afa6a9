import { BadRequestError } from '@forge-fleet/shared';
import type { FastifyInstance } from 'fastify';

/**
 * Where `value` holds a key that can reach `Object.prototype` once merged into
 * another object — `__proto__` anywhere, or `constructor` holding `prototype`
 * (what secure-json-parse refuses) — as a path, or `undefined`. A loop rather
 * than recursion: bodies may nest deeper than the stack goes.
 */
export function prototypeKeyPath(value: unknown): { key: string; path: string } | undefined {
  const stack: { value: unknown; path: string }[] = [{ value, path: '' }];
  for (let item = stack.pop(); item !== undefined; item = stack.pop()) {
    const v = item.value;
    if (typeof v !== 'object' || v === null) continue;
    if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) stack.push({ value: v[i], path: `${item.path}[${i}]` });
      continue;
    }
    for (const key of Object.keys(v)) {
      const path = item.path === '' ? key : `${item.path}.${key}`;
      const child = (v as Record<string, unknown>)[key];
      if (key === '__proto__') return { key, path };
      if (key === 'constructor' && typeof child === 'object' && child !== null && Object.hasOwn(child, 'prototype')) return { key: 'constructor.prototype', path: `${path}.prototype` };
      stack.push({ value: child, path });
    }
  }
  return undefined;
}

/**
 * `parsed` — a body zod checked — with its `arguments` as JSON.parse made them. zod copies a record into a new
 * object, where a `__proto__` key would set a prototype (or vanish) rather than stay a key; kept as sent, the
 * argument check (limits/arguments.ts) sees every key sent and refuses a prototype key with the same answer on
 * every route that takes a call's arguments: the call routes, and an approval's `modify`.
 */
export function withArgumentsAsSent<T extends { readonly arguments?: Record<string, unknown> | undefined }>(parsed: T, raw: unknown): T {
  const sent = typeof raw === 'object' && raw !== null ? (raw as { arguments?: unknown }).arguments : undefined;
  return typeof sent === 'object' && sent !== null && !Array.isArray(sent) ? { ...parsed, arguments: sent as Record<string, unknown> } : parsed;
}

/** Text that may hold a prototype key (an escape can spell one): only such bodies are walked. */
const MAYBE_PROTOTYPE_KEY = /proto|constructor|\\u/;

/** {@link prototypeKeyPath} of a body parsed from `text`, walking it only when the text could hold such a key. */
export function prototypeKeyIn(text: string, value: unknown): { key: string; path: string } | undefined {
  return MAYBE_PROTOTYPE_KEY.test(text) ? prototypeKeyPath(value) : undefined;
}

/**
 * Parses JSON request bodies. `JSON.parse` itself never touches a prototype (it
 * defines `__proto__` as an own key); what is done with such a key is decided here:
 *
 * - `refuse` (every route but the call routes): the body is refused with 400
 *   BAD_REQUEST naming the key and where it is;
 * - `keep` (the call and approval routes): the keys stay, and each call's
 *   arguments are refused on their own by the argument check, with the same
 *   answer on every entrance (a batch's other calls run); the routes' strict
 *   schemas refuse them anywhere else.
 *
 */
export function jsonBodies(app: FastifyInstance, prototypeKeys: 'refuse' | 'keep'): void {
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, text, done) => {
    const body = text as string;
    if (body.length === 0) return done(new BadRequestError("the body is empty; send a JSON document (or no content-type header with no body)"), undefined);
    let value: unknown;
    try {
      value = JSON.parse(body);
    } catch (error) {
      return done(new BadRequestError(`the body is not valid JSON (${error instanceof Error ? error.message : String(error)})`), undefined);
    }
    const found = prototypeKeys === 'refuse' ? prototypeKeyIn(body, value) : undefined;
    if (found !== undefined) {
      return done(new BadRequestError(`the key '${found.key}' (at '${found.path}') is refused anywhere in a body: merged into an object it can reach Object.prototype; rename the field`, { key: found.key }), undefined);
    }
    done(null, value);
  });
}
