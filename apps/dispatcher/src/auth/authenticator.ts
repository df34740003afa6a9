import {
  type Authorization,
  BadRequestError,
  ForbiddenError,
  type NamedScope,
  type Role,
  type ScopeRegistry,
  ToolScope,
  type TokenVerifier,
  UnauthenticatedError,
} from '@forge-fleet/shared';

/** Who is asking, as the HTTP layer found out from the request's token. */
export interface Caller {
  /** The token's subject (the agent or person); `undefined` for an anonymous dev-mode caller. */
  readonly subject: string | undefined;
  readonly role: Role;
  /** The scope the token (or, in dev mode, `x-forge-task`) puts the caller in. */
  readonly scope: NamedScope;
  /** The grants the tier policy weighs for Host-tier tools. */
  readonly authorization: Authorization | undefined;
}

export interface AuthenticatorOptions {
  /** Verifies agent capability tokens; `undefined` only in dev mode. */
  readonly verifier: TokenVerifier | undefined;
  /**
   * Development only: requests without a token are served as an anonymous
   * agent with no grants, whose scope the `x-forge-task` header picks.
   */
  readonly devMode: boolean;
  readonly scopes: ScopeRegistry;
}

/**
 * Turns a request's `Authorization: Bearer <token>` into a {@link Caller}.
 * The token decides the scope: its own tool patterns, else its task type's
 * scope from the policy, else the default scope.
 */
export class Authenticator {
  /**
   * Callers already found, by the request's headers object: the app's door
   * authenticates each request before its body is read, and the route's
   * `caller(request.headers)` then gets that caller without verifying again.
   */
  readonly #known = new WeakMap<object, Caller>();

  constructor(private readonly o: AuthenticatorOptions) {}

  /**
   * The caller of a request, from its headers (the same headers object answers
   * with the same caller, verified once).
   * @throws UnauthenticatedError for a missing (outside dev mode), malformed, expired or foreign token.
   */
  async caller(headers: { authorization?: string | undefined; 'x-forge-task'?: string | string[] | undefined }): Promise<Caller> {
    const known = this.#known.get(headers);
    if (known !== undefined) return known;
    const caller = await this.#verify(headers);
    this.#known.set(headers, caller);
    return caller;
  }

  async #verify(headers: { authorization?: string | undefined; 'x-forge-task'?: string | string[] | undefined }): Promise<Caller> {
    const header = headers.authorization;
    if (header === undefined || header === '') {
      if (!this.o.devMode) throw new UnauthenticatedError('send `Authorization: Bearer <token>` with an agent capability token (`forge token mint`)');
      return this.#anonymous(headers['x-forge-task']);
    }
    const match = /^Bearer\s+(\S+)$/i.exec(header);
    if (match === null) throw new UnauthenticatedError('the Authorization header must be "Bearer <token>"');
    if (this.o.verifier === undefined) throw new UnauthenticatedError('this dispatcher has no token key configured (FORGE_TOKEN_PUBLIC_KEY); it serves anonymous dev-mode callers only');
    const claims = await this.o.verifier.verify(match[1]!);
    let scope: NamedScope;
    if (claims.scope !== undefined) scope = { name: `token:${claims.task ?? claims.sub}`, scope: ToolScope.allow(claims.scope) };
    else {
      const named = this.o.scopes.resolve(claims.task);
      if (named === undefined) throw new UnauthenticatedError(`the token names task type '${String(claims.task)}', which this fleet's policy does not define (known: ${this.o.scopes.taskTypes().join(', ') || 'none'})`);
      scope = named;
    }
    return { subject: claims.sub, role: claims.role, scope, authorization: { subject: claims.sub, tools: claims.grants } };
  }

  #anonymous(taskHeader: string | string[] | undefined): Caller {
    const taskType = Array.isArray(taskHeader) ? taskHeader[0] : taskHeader;
    const scope = this.o.scopes.resolve(taskType === '' ? undefined : taskType);
    if (scope === undefined) throw new BadRequestError(`unknown task type '${String(taskType)}' in x-forge-task; known: ${this.o.scopes.taskTypes().join(', ') || 'none'}`);
    return { subject: undefined, role: 'agent', scope, authorization: undefined };
  }
}

/** The realm of the dispatcher's bearer challenge. */
export const AUTH_REALM = 'forge-fleet';

/**
 * The `WWW-Authenticate` challenge of a 401 (RFC 9110 §11.6.1; RFC 6750 §3):
 * how to authenticate, and, when a token was presented and refused, that it
 * was invalid and why (MCP clients read this to find how to sign in).
 */
export function bearerChallenge(tokenPresented: boolean, reason: string): string {
  if (!tokenPresented) return `Bearer realm="${AUTH_REALM}"`;
  // A quoted-string may not hold `"` or `\`, nor anything outside printable ASCII.
  const description = reason.replace(/[^\x20-\x7e]|["\\]/g, "'");
  return `Bearer realm="${AUTH_REALM}", error="invalid_token", error_description="${description}"`;
}

/** @throws ForbiddenError unless the caller has one of `roles`. */
export function requireRole(caller: Caller, action: string, roles: readonly Role[]): void {
  if (!roles.includes(caller.role)) throw new ForbiddenError(action, caller.role, roles);
}
