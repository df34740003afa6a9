import { describe, expect, it } from 'vitest';
import { classifyTier, executionContextFor, requiresAuthorization } from './classify.js';
import { Tier, TIERS, TierInput, tierNumber } from './tier.js';

describe('tier classification', () => {
  it('platform tools run in the sandbox without authorization', () => {
    const cls = classifyTier('clock', 'platform');
    expect(cls.requiresAuthorization).toBe(false);
    expect(cls.executionContext).toBe('in_sandbox');
  });

  it('host tools (the seed calls them External) run out of the sandbox and need authorization', () => {
    const cls = classifyTier('web_browse', TierInput.parse('external'));
    expect(cls.requiresAuthorization).toBe(true);
    expect(cls.executionContext).toBe('out_of_sandbox');
  });

  it('embedded tools run in the sandbox without authorization', () => {
    const cls = classifyTier('json_parse', 'embedded');
    expect(cls.requiresAuthorization).toBe(false);
    expect(cls.executionContext).toBe('in_sandbox');
  });

  it('a classification carries the tool name and tier', () => {
    const cls = classifyTier('db_query', 'host');
    expect(cls).toEqual({ toolName: 'db_query', tier: 'host', requiresAuthorization: true, executionContext: 'out_of_sandbox' });
    expect(Object.isFrozen(cls)).toBe(true);
  });

  it('requiresAuthorization is true for the host tier only', () => {
    expect(TIERS.map((t) => [t, requiresAuthorization(t)])).toEqual([
      ['platform', false],
      ['host', true],
      ['embedded', false],
    ]);
  });

  it('executionContextFor matches the tier table', () => {
    expect(executionContextFor('platform')).toBe('in_sandbox');
    expect(executionContextFor('host')).toBe('out_of_sandbox');
    expect(executionContextFor('embedded')).toBe('in_sandbox');
  });

  it('numbers the tiers 1, 2, 3 and admits no fourth', () => {
    expect(TIERS.map(tierNumber)).toEqual([1, 2, 3]);
    expect(Tier.safeParse('external').success).toBe(false);
    expect(TierInput.safeParse('tier4').success).toBe(false);
  });
});
