import { generateTokenKeys, mintToken, ScopeRegistry, TokenVerifier, ToolScope } from '@forge-fleet/shared';
import { describe, expect, it } from 'vitest';
import { Authenticator, bearerChallenge, requireRole } from './authenticator.js';

const keys = generateTokenKeys();
const scopes = new ScopeRegistry(ToolScope.allow(['clock'])).register('research', ToolScope.allow(['search.*']));
const auth = new Authenticator({ verifier: new TokenVerifier(keys.publicKeyPem), devMode: false, scopes });
const bearer = async (options: Parameters<typeof mintToken>[1]) => ({ authorization: `Bearer ${await mintToken(keys.privateKeyPem, options)}` });

describe('Authenticator', () => {
  it('takes subject, role, grants and the task type\'s scope from the token', async () => {
    const caller = await auth.caller(await bearer({ subject: 'agent-1', task: 'research', grants: ['db.*'] }));
    expect(caller).toMatchObject({ subject: 'agent-1', role: 'agent', authorization: { subject: 'agent-1', tools: ['db.*'] } });
    expect(caller.scope.name).toBe('research');
    expect(caller.scope.scope.admits('search.web')).toBe(true);
    expect(caller.scope.scope.admits('clock')).toBe(false);
  });

  it('lets a token\'s own tool patterns override its task type, and falls back to the default scope', async () => {
    const own = await auth.caller(await bearer({ subject: 'a', task: 'research', scope: ['clock', 'echo'] }));
    expect(own.scope.name).toBe('token:research');
    expect(own.scope.scope.admits('echo')).toBe(true);
    const plain = await auth.caller(await bearer({ subject: 'a' }));
    expect(plain.scope.name).toBe('default');
  });

  it('refuses a missing token outside dev mode, a malformed header, and an unknown task type', async () => {
    await expect(auth.caller({})).rejects.toMatchObject({ code: 'UNAUTHENTICATED' });
    await expect(auth.caller({ authorization: 'Basic abc' })).rejects.toMatchObject({ code: 'UNAUTHENTICATED', message: expect.stringMatching(/Bearer/) as string });
    await expect(auth.caller(await bearer({ subject: 'a', task: 'billing' }))).rejects.toMatchObject({ code: 'UNAUTHENTICATED', message: expect.stringMatching(/billing/) as string });
  });

  it('ignores x-forge-task from token holders; in dev mode serves anonymous callers by it', async () => {
    const withHeader = await auth.caller({ ...(await bearer({ subject: 'a' })), 'x-forge-task': 'research' });
    expect(withHeader.scope.name).toBe('default');
    const devAuth = new Authenticator({ verifier: undefined, devMode: true, scopes });
    expect(await devAuth.caller({ 'x-forge-task': 'research' })).toMatchObject({ subject: undefined, role: 'agent', authorization: undefined, scope: { name: 'research' } });
    await expect(devAuth.caller({ 'x-forge-task': 'nope' })).rejects.toMatchObject({ code: 'BAD_REQUEST' });
  });

  it('refuses a role that may not do the action with FORBIDDEN', async () => {
    const approver = await auth.caller(await bearer({ subject: 'p', role: 'approver' }));
    expect(() => requireRole(approver, 'call tools', ['agent', 'admin'])).toThrow(expect.objectContaining({ code: 'FORBIDDEN' }) as Error);
    expect(() => requireRole(approver, 'decide approvals', ['approver', 'admin'])).not.toThrow();
  });

  it('verifies a request once: the same headers object answers with the same caller', async () => {
    const headers = await bearer({ subject: 'once' });
    const first = await auth.caller(headers);
    expect(await auth.caller(headers)).toBe(first);
  });

  it('challenges with the bearer realm, and says invalid_token (quoted safely) for a refused token', () => {
    expect(bearerChallenge(false, 'send a token')).toBe('Bearer realm="forge-fleet"');
    expect(bearerChallenge(true, 'the "exp" claim \\ é')).toBe(`Bearer realm="forge-fleet", error="invalid_token", error_description="the 'exp' claim ' '"`);
  });
});
