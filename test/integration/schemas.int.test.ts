/**
 * Tool schemas through a real fleet: tools whose parameters have a root `$id` (alone, shared by two tools, kept by
 * a new version), schemas the validator cannot run safely, and the JSON-Schema-Test-Suite (through the validator
 * the dispatcher uses, and through `POST /v1/calls`) against the committed list of known gaps.
 */
import type { ToolDefinition } from '@forge-fleet/shared';
import { Catalog, fleetKeys } from '@forge-fleet/store';
import { describe, expect, it } from 'vitest';
import { fleetPerTest } from '../fixtures/fleet-per-test.js';
import { SUITE_DRAFTS, suiteTools, validatorVerdicts } from '../fixtures/schema-suite.js';
import { GAP_REASONS, type GapReason, type GapVerdict, HTTP_ONLY_GAPS, VALIDATOR_GAPS } from '../fixtures/schema-suite-gaps.js';
import { until } from '../fixtures/wait.js';

const ID_TOOLS = 'test/fixtures/schema-id-tools.ts';
const ID_TOOLS_V2 = 'test/fixtures/schema-id-tools-v2.ts';

interface Answer {
  status: number;
  body: { status?: string; result?: { content?: string; isError?: boolean }; error?: { code?: string; message?: string; retryable?: boolean } };
}

/** `POST /v1/calls?wait=…` as an anonymous dev-mode agent. */
async function call(url: string, name: string, args: unknown): Promise<Answer> {
  const res = await fetch(`${url}/v1/calls?wait=10000`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name, arguments: args }) });
  return { status: res.status, body: (await res.json()) as Answer['body'] };
}

/** The answer's gist: the tool's content when it ran, the error code otherwise. */
const gist = (a: Answer): string => (a.status === 200 && a.body.status === 'completed' ? `ran: ${a.body.result?.content ?? ''}` : `${a.status} ${a.body.error?.code ?? a.body.status ?? ''}`);

describe('tools whose parameters have a root $id', () => {
  const t = fleetPerTest();

  it('serves a tool with a root $id, and two tools sharing an $id each by its own rules', async () => {
    await t.fleet.worker({ tier: 'platform', tools: ID_TOOLS });
    const { url } = await t.fleet.dispatcher();
    expect(gist(await call(url, 'find', { q: 'a' }))).toBe('ran: find v1');
    expect(gist(await call(url, 'find', { q: 1 }))).toBe('422 SCHEMA_VALIDATION');
    expect(gist(await call(url, 'pick', { n: 1 }))).toBe('ran: pick');
    expect(gist(await call(url, 'pick', { n: 'x' }))).toBe('422 SCHEMA_VALIDATION');
    expect(gist(await call(url, 'place', { at: 'x' }))).toBe('ran: place');
    expect(gist(await call(url, 'place', { at: 1 }))).toBe('422 SCHEMA_VALIDATION');
  });

  it('serves version 2 of a tool that keeps its $id once the worker restarts with it, without restarting the dispatcher', async () => {
    const v1 = await t.fleet.worker({ tier: 'platform', tools: ID_TOOLS });
    const { url } = await t.fleet.dispatcher();
    expect(gist(await call(url, 'find', { q: 'a' }))).toBe('ran: find v1');
    await v1.stop();
    await t.fleet.worker({ tier: 'platform', tools: ID_TOOLS_V2 });
    // The dispatcher re-reads the catalog when a worker joins; v2's rules and answer show once it has.
    await until('the dispatcher to serve find v2', async () => gist(await call(url, 'find', { q: 'a', limit: 3 })) === 'ran: find v2');
    expect(gist(await call(url, 'find', { q: 'a', limit: 11 }))).toBe('422 SCHEMA_VALIDATION');
    expect(gist(await call(url, 'find', { q: 'a' }))).toBe('422 SCHEMA_VALIDATION');
  });
});

describe('schemas the validator cannot run safely', () => {
  const t = fleetPerTest();

  it('keeps a worker from starting, naming what in the schema to change', async () => {
    const start = t.fleet.worker({ tier: 'platform', tools: 'test/fixtures/schema-overflow-tools.ts' });
    await expect(start).rejects.toThrow(/INVALID_DEFINITION: the definition of tool 'loops' is invalid at '\/parameters\/\$defs\/baseSchema\/\$dynamicRef': the validator follows its \$refs without end/);
  });

  it('is refused at the catalog read: a call gets INVALID_DEFINITION, not a retryable 500', async () => {
    await t.fleet.worker({ tier: 'platform', tools: ID_TOOLS });
    const { url } = await t.fleet.dispatcher();
    // As an older or misbehaving worker would announce it: the definition never went through this fleet's checks.
    const loops = {
      name: 'loops',
      description: '',
      tier: 'platform',
      retryable: false,
      speculatable: false,
      requiresConfirmation: false,
      parameters: {
        $schema: 'https://json-schema.org/draft/2020-12/schema',
        $id: 'https://example.com/unevaluated-properties-with-dynamic-ref/derived',
        type: 'object',
        $ref: './baseSchema',
        $defs: {
          derived: { $dynamicAnchor: 'addons', properties: { bar: { type: 'string' } } },
          baseSchema: { $id: './baseSchema', unevaluatedProperties: false, properties: { foo: { type: 'string' } }, $dynamicRef: '#addons', $defs: { defaultAddons: { $dynamicAnchor: 'addons' } } },
        },
      },
    } as unknown as ToolDefinition;
    await new Catalog(t.redis, fleetKeys(t.fleet.prefix)).announce('platform', 'rogue-worker', [loops], 60_000, { notify: true });
    const answer = await until('the dispatcher to have read the announcement', async () => {
      const a = await call(url, 'loops', { foo: 'x' });
      return a.body.error?.code === 'TOOL_NOT_FOUND' ? undefined : a;
    });
    expect(answer.status).toBe(400);
    expect(answer.body.error).toMatchObject({ code: 'INVALID_DEFINITION', retryable: false });
    expect(answer.body.error?.message).toMatch(/\/parameters\/\$defs\/baseSchema\/\$dynamicRef.*follows its \$refs without end/);
    // The tools announced beside it are served as before.
    expect(gist(await call(url, 'find', { q: 'a' }))).toBe('ran: find v1');
  });
});

/** Every case whose verdict is not the suite's, as `[verdict, reason]`, with `reasonOf` naming the reason. */
function disagreements(verdicts: Iterable<[string, { verdict: GapVerdict; expected: boolean }]>, reasonOf: (key: string) => GapReason | 'UNLISTED'): Record<string, readonly [GapVerdict, GapReason | 'UNLISTED']> {
  const found: Record<string, readonly [GapVerdict, GapReason | 'UNLISTED']> = {};
  for (const [key, { verdict, expected }] of verdicts) {
    if (verdict !== (expected ? 'valid' : 'invalid')) found[key] = [verdict, reasonOf(key)];
  }
  return found;
}

describe('the JSON-Schema-Test-Suite (draft 2020-12 and draft-07)', () => {
  const t = fleetPerTest();

  it('agrees with the validator the dispatcher uses everywhere but the known gaps', () => {
    const all = new Map(SUITE_DRAFTS.flatMap((draft) => [...validatorVerdicts(draft)]));
    const found = disagreements(all, (key) => VALIDATOR_GAPS[key]?.[1] ?? 'UNLISTED');
    // A new disagreement shows as UNLISTED; a closed gap shows as missing from `found`: update schema-suite-gaps.ts.
    expect(found).toEqual(VALIDATOR_GAPS);
    expect(all.size).toBeGreaterThan(2000);
    expect(new Set(Object.values(VALIDATOR_GAPS).map(([, reason]) => reason))).toEqual(new Set(Object.keys(GAP_REASONS).filter((r) => r !== 'reservedKey')));
  });

  it('agrees through POST /v1/calls of a real fleet everywhere but the known gaps', async () => {
    const tools = suiteTools();
    await t.fleet.worker({ tier: 'platform', tools: 'test/fixtures/schema-suite-tools.ts', concurrency: 32 });
    const { url } = await t.fleet.dispatcher();
    const served = new Set((((await (await fetch(`${url}/v1/tools`)).json()) as { tools: { name: string }[] }).tools ?? []).map((d) => d.name));
    const verdicts = new Map<string, { verdict: GapVerdict; expected: boolean }>();
    const unexpected: string[] = [];
    const work = tools.flatMap((tool) => tool.cases.map((c) => ({ tool, c })));
    // Bounded parallelism: a few hundred calls, 16 in flight.
    for (let i = 0; i < work.length; i += 16) {
      await Promise.all(
        work.slice(i, i + 16).map(async ({ tool, c }) => {
          if (!served.has(tool.name)) {
            verdicts.set(c.key, { verdict: 'schema refused', expected: c.valid });
            return;
          }
          const answer = await call(url, tool.name, c.data);
          const verdict: GapVerdict | undefined =
            answer.status === 200 && answer.body.result?.content === 'ok'
              ? 'valid'
              : answer.body.error?.code === 'SCHEMA_VALIDATION'
                ? 'invalid'
                : answer.body.error?.code === 'BAD_REQUEST'
                  ? 'arguments refused'
                  : undefined;
          if (verdict === undefined) unexpected.push(`${c.key}: ${gist(answer)}`);
          else verdicts.set(c.key, { verdict, expected: c.valid });
        }),
      );
    }
    expect(unexpected).toEqual([]);
    // Through HTTP the validator's gaps hold for the cases sent, and the door's own refusals come on top.
    const expected: Record<string, readonly [GapVerdict, GapReason]> = {};
    for (const key of verdicts.keys()) {
      const gap = HTTP_ONLY_GAPS[key] ?? VALIDATOR_GAPS[key];
      if (gap !== undefined) expected[key] = gap;
    }
    expect(disagreements(verdicts, (key) => expected[key]?.[1] ?? 'UNLISTED')).toEqual(expected);
    expect(Object.keys(HTTP_ONLY_GAPS).every((key) => verdicts.has(key))).toBe(true);
    expect(served.size).toBeGreaterThan(200);
    expect(verdicts.size).toBe(work.length);
    expect([...verdicts.values()].filter((v) => v.verdict === 'valid' || v.verdict === 'invalid').length).toBeGreaterThan(600);
  }, 120_000);
});
