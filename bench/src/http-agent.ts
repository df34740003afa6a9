/**
 * The http-per-call arm's agent (issue #17): not `FleetClient`, but what an
 * agent in another language writes — one `POST /v1/calls?wait=…` per call
 * over a keep-alive pool of `inflight` connections (undici's `Pool`), the
 * JSON answer read and a call counted only when it `completed`. No batches,
 * no call streams: every call is its own request and its own answer.
 */
import { Pool } from 'undici';
import { runAgent } from './agent-loop.js';

const [url = '', inflight = '1'] = process.argv.slice(2);
const n = Math.max(1, Number(inflight));
/** The longest wait the route takes (docs/http-api.md): a call on a slow stretch is still answered, not left `queued`. */
const WAIT_MS = 60_000;
const path = `/v1/calls?wait=${WAIT_MS}`;
const headers = { authorization: `Bearer ${process.env.FORGE_TOKEN ?? ''}`, 'content-type': 'application/json' };
const body = JSON.stringify({ name: 'noop', arguments: {} });
// One connection per call in flight, kept alive between calls (undici's default), as a pooled HTTP client does.
const pool = new Pool(url, { connections: n, pipelining: 1, keepAliveTimeout: 60_000 });

await runAgent(n, async () => {
  const answer = await pool.request({ method: 'POST', path, headers, body });
  // Read whole either way: an unread body would hold its connection.
  const text = await answer.body.text();
  if (answer.statusCode !== 200) throw new Error(`POST /v1/calls answered ${answer.statusCode}: ${text.slice(0, 200)}`);
  const view = JSON.parse(text) as { status?: string };
  if (view.status !== 'completed') throw new Error(`call ended ${String(view.status)}: ${text.slice(0, 200)}`);
});
await pool.close();
process.exit(0);
