/**
 * One agent of the MCP soak (mcp-soak.ts): `soak-agent.ts <url> <name> <inflight> <ms> <report file>`.
 * Calls `everything.echo` and `everything.get-sum` in turn, `inflight` at a
 * time, for `ms`; each call has an id of its own and arguments that make its
 * answer unique, so an answer to the wrong call shows. Then asks the
 * dispatcher for every call by id (GET /v1/calls/:id), and writes what it
 * saw to the report file: per call, the answer it got and the dispatcher's status.
 */
import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { FleetClient } from '@forge-fleet/client';

const [url = '', name = 'agent', inflightText = '4', msText = '60000', reportFile = ''] = process.argv.slice(2);
const inflight = Math.max(1, Number(inflightText));
const ms = Number(msText);

/** What became of one call, as this agent saw it. */
export interface SoakCallRecord {
  readonly id: string;
  /** `ok`: the right answer; `wrong`: an answer to something else; `failed`: an error result (its code); `thrown`: no answer (the error). */
  outcome: 'ok' | 'wrong' | 'failed' | 'thrown';
  detail?: string;
  /** How many answers the call got: exactly 1 is the soak's bar. */
  answers: number;
  /** The dispatcher's status of the call afterwards. */
  status?: string;
}

/** A worker killed mid-call re-runs the call elsewhere: generous, so the soak measures loss, not patience. */
const CALL_TIMEOUT_MS = 120_000;

const client = new FleetClient({ url, token: process.env.FORGE_TOKEN ?? '', connections: inflight, timeoutMs: CALL_TIMEOUT_MS });
const records: SoakCallRecord[] = [];
const end = Date.now() + ms;
let n = 0;

async function one(): Promise<void> {
  const k = n++;
  const id = `${name}-${k}-${randomUUID()}`;
  const record: SoakCallRecord = { id, outcome: 'thrown', answers: 0 };
  records.push(record);
  const sum = k % 2 === 1;
  const args = sum ? { a: k, b: 1_000_000 } : { message: id };
  const expected = sum ? `The sum of ${k} and 1000000 is ${k + 1_000_000}.` : `Echo: ${id}`;
  try {
    const result = await client.call(sum ? 'everything.get-sum' : 'everything.echo', args, { id });
    record.answers++;
    if (result.isError) {
      record.outcome = 'failed';
      record.detail = result.error?.code ?? result.content.slice(0, 200);
    } else {
      record.outcome = result.content === expected ? 'ok' : 'wrong';
      if (record.outcome === 'wrong') record.detail = result.content.slice(0, 200);
    }
  } catch (error) {
    record.answers++;
    record.outcome = 'thrown';
    record.detail = (error as { code?: string }).code ?? (error instanceof Error ? error.message : String(error));    // A refused call comes back at once: without a pause this loop would flood the dispatcher with calls meant to be refused.
    await new Promise((r) => setTimeout(r, 50));
  }
}

await Promise.all(
  Array.from({ length: inflight }, async () => {
    while (Date.now() < end) await one();
  }),
);
// Every call asked for once more, by id: none may still be queued or running.
let next = 0;
await Promise.all(
  Array.from({ length: Math.min(32, inflight * 4) }, async () => {
    while (next < records.length) {
      const record = records[next++]!;
      try {
        record.status = (await client.get(record.id)).status;
      } catch (error) {
        record.status = `error: ${(error as { code?: string }).code ?? String(error)}`;
      }
    }
  }),
);
writeFileSync(reportFile, `${JSON.stringify({ name, records })}\n`);
await client.close();
process.exit(0);
