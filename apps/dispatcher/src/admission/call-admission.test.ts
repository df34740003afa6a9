import { Approval, type ApprovalDecision, defineTool, isFleetError, MemoryRiskSignalQueue, ToolScope, type ToolCall } from '@forge-fleet/shared';
import { describe, expect, it } from 'vitest';
import type { DecisionAudit } from '../audit/decisions.js';
import type { Caller } from '../auth/authenticator.js';
import type { CatalogView } from '../catalog/catalog-view.js';
import { CallAdmission } from './call-admission.js';

const limits = { maxBytes: 1024, maxDepth: 4 };
const caller: Caller = { subject: 'agent-1', role: 'agent', scope: { name: 'default', scope: ToolScope.full() }, authorization: undefined };
/** A tool whose schema takes any object: only the input limits stand between an edit and a run. */
const anything = defineTool({ name: 'anything', tier: 'platform', handler: () => 'ran' }).definition;
const catalog = { ensure: () => Promise.resolve(), lookup: () => anything, definitionOf: () => anything } as unknown as CatalogView;

/** An admission whose approval step answers `decide(arguments)`, and the codes of the rejections it audited. */
function admission(decide: (args: Record<string, unknown>) => ApprovalDecision) {
  const audited: string[] = [];
  const audit = {
    rejectedCall: (_caller: Caller, _id: string, _tool: string, error: unknown) => {
      audited.push(isFleetError(error) ? error.code : 'INTERNAL');
      return Promise.resolve();
    },
  } as unknown as DecisionAudit;
  const admit = new CallAdmission({ catalog, approval: { check: (call) => decide(call.arguments) }, risk: new MemoryRiskSignalQueue(), limits, audit });
  return { admit: (args: Record<string, unknown>) => admit.admit({ id: 'c1', name: 'anything', arguments: args } satisfies ToolCall, {}, caller), audited };
}

async function answerTo(promise: Promise<unknown>): Promise<{ code: string; httpStatus: number; message: string } | 'admitted'> {
  try {
    await promise;
    return 'admitted';
  } catch (error) {
    if (isFleetError(error)) return { code: error.code, httpStatus: error.httpStatus, message: error.message };
    throw error;
  }
}

const OVER_LIMITS: Record<string, Record<string, unknown>> = {
  'over the byte limit': { text: 'x'.repeat(2000) },
  'nested past the depth limit': { a: { b: { c: { d: { e: 1 } } } } },
  'a constructor key': { options: { constructor: 'Object' } },
  'a prototype key': { list: [{ prototype: {} }] },
  'a __proto__ key': JSON.parse('{"a":{"__proto__":{"polluted":true}}}') as Record<string, unknown>,
};

describe('CallAdmission', () => {
  it('holds arguments an approval handler puts in place of the submitted ones to the limits the submitted ones meet, with the same answer', async () => {
    for (const [what, edited] of Object.entries(OVER_LIMITS)) {
      const submitted = await answerTo(admission(() => Approval.approve()).admit(edited));
      expect(submitted, what).not.toBe('admitted');
      for (const decision of [Approval.modify(edited), Approval.pending('a person decides', edited)]) {
        const { admit, audited } = admission(() => decision);
        expect({ what, kind: decision.kind, answer: await answerTo(admit({ n: 1 })) }).toEqual({ what, kind: decision.kind, answer: submitted });
        // Refused at admission like a submission: audited once, with its code.
        expect(audited).toEqual([(submitted as { code: string }).code]);
      }
    }
  });

  it('admits an edit within the limits', async () => {
    const { admit } = admission(() => Approval.modify({ n: 2 }));
    expect(await admit({ n: 1 })).toMatchObject({ status: 'approved', modified: true, call: { arguments: { n: 2 } } });
  });
});
