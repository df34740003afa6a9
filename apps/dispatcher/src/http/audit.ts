import { BadRequestError, InternalError } from '@forge-fleet/shared';
import type { AuditReader } from '@forge-fleet/store';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { type Authenticator, requireRole } from '../auth/authenticator.js';
import { parseRequest } from './errors.js';

/** Most entries one `GET /v1/audit` answers with. */
export const MAX_AUDIT_LIMIT = 1000;

/**
 * A time as epoch milliseconds or an ISO-8601 string, at or after 1970: audit
 * entries are stream IDs of epoch milliseconds, which Redis refuses below 0.
 */
const Instant = z
  .union([
    z
      .string()
      .regex(/^\d{1,15}$/)
      .transform(Number),
    z.iso.datetime({ offset: true }).transform((s) => Date.parse(s)),
    z.iso.date().transform((s) => Date.parse(s)),
  ])
  .pipe(z.number().int('is not a time').min(0, 'is before 1970-01-01, where the audit stream begins; give a later time').max(Number.MAX_SAFE_INTEGER, 'is too far in the future'));

export const AuditQuery = z.strictObject({
  callId: z.string().min(1).max(128).optional(),
  caller: z.string().min(1).max(256).optional(),
  tool: z.string().min(1).max(128).optional(),
  decision: z.enum(['listed', 'rejected', 'approved', 'modified', 'awaiting_approval', 'completed', 'failed', 'cancelled']).optional(),
  category: z.enum(['out_of_scope', 'schema', 'denied', 'forged', 'unauthenticated', 'forbidden', 'not_found', 'no_worker', 'bad_request']).optional(),
  since: Instant.optional(),
  until: Instant.optional(),
  limit: z.coerce.number().int().min(1).max(MAX_AUDIT_LIMIT, `limit is at most ${MAX_AUDIT_LIMIT}`).default(100),
});
export type AuditQuery = z.infer<typeof AuditQuery>;

/** `GET /v1/audit`: the audit stream, newest first, filtered (admins only). */
export function auditRoutes(reader: AuditReader, auth: Authenticator) {
  return (app: FastifyInstance): void => {
    app.get('/v1/audit', async (request) => {
      const caller = await auth.caller(request.headers);
      requireRole(caller, 'read the audit stream', ['admin']);
      const q = parseRequest(AuditQuery, request.query, 'query');
      if (q.since !== undefined && q.until !== undefined && q.since > q.until) throw new BadRequestError('query: since is after until');
      try {
        return { entries: await reader.query(q) };
      } catch (error) {
        if (error instanceof Error && /NOPERM/.test(error.message)) {
          throw new InternalError("the dispatcher's Redis user may not read the audit stream (the fleet ACL makes it append-only); set FORGE_AUDIT_REDIS_URL to a Redis user that may read it", { cause: error });
        }
        throw error;
      }
    });
  };
}
