import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { FleetClient } from '@forge-fleet/client';
import { freePort } from '@forge-fleet/local-redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestFleet } from '../fixtures/fleet.js';
import { sample } from '../fixtures/prometheus.js';
import { until } from '../fixtures/wait.js';

/** One span as an OTLP/HTTP JSON export carries it, with its process's service name. */
interface ExportedSpan {
  service: string;
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  attributes: Record<string, unknown>;
}

type OtlpValue = { stringValue?: string; intValue?: string | number; boolValue?: boolean; doubleValue?: number };
type OtlpAttribute = { key: string; value: OtlpValue };
type OtlpExport = { resourceSpans?: { resource?: { attributes?: OtlpAttribute[] }; scopeSpans?: { spans?: (Omit<ExportedSpan, 'service' | 'attributes'> & { attributes?: OtlpAttribute[] })[] }[] }[] };

const valueOf = (v: OtlpValue): unknown => v.stringValue ?? v.intValue ?? v.boolValue ?? v.doubleValue;
const attributesOf = (list: OtlpAttribute[] = []): Record<string, unknown> => Object.fromEntries(list.map((a) => [a.key, valueOf(a.value)]));

/** A stand-in OpenTelemetry collector: receives OTLP/HTTP JSON exports and keeps their spans. */
async function collector(): Promise<{ url: string; spans: ExportedSpan[]; server: Server }> {
  const spans: ExportedSpan[] = [];
  const server = createServer((request, response) => {
    let body = '';
    request.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
    request.on('end', () => {
      const exported = JSON.parse(body) as OtlpExport;
      for (const resourceSpans of exported.resourceSpans ?? []) {
        const service = String(attributesOf(resourceSpans.resource?.attributes)['service.name']);
        for (const scope of resourceSpans.scopeSpans ?? []) for (const span of scope.spans ?? []) spans.push({ ...span, service, attributes: attributesOf(span.attributes) });
      }
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, spans, server };
}

/**
 * What operators see of a running fleet: Prometheus metrics on the dispatcher
 * and on each worker's own port, and one trace per call across the
 * dispatcher and worker processes, exported over OTLP.
 */
describe('metrics and traces of a running fleet', () => {
  const fleet = new TestFleet();
  let otlp: Awaited<ReturnType<typeof collector>>;
  let dispatcherUrl: string;
  let workerMetrics: string;
  let agent: FleetClient;

  beforeAll(async () => {
    otlp = await collector();
    const tracing = { OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url };
    const port = await freePort();
    workerMetrics = `http://127.0.0.1:${port}`;
    await Promise.all([
      fleet.worker({ tier: 'platform', env: { ...tracing, FORGE_METRICS_PORT: String(port), FORGE_METRICS_HOST: '127.0.0.1' } }),
      fleet.worker({ tier: 'host', env: { ...tracing, FORGE_METRICS_PORT: '0' } }),
    ]);
    const dispatcher = await fleet.dispatcher({ ...tracing, FORGE_DEV_MODE: '0' });
    dispatcherUrl = dispatcher.url;
    agent = new FleetClient({ url: dispatcherUrl, token: await fleet.token({ subject: 'metrics-agent', scope: ['echo', 'fails', 'host_echo', 'confirm_echo'] }) });
    await until('the worker metrics port', async () => (await fetch(`${workerMetrics}/healthz`)).ok);
  });

  afterAll(async () => {
    await agent?.close();
    await fleet.stopAll();
    otlp?.server.close();
  });

  it('counts every outcome where it is decided, times runs, and reports queues, workers and pending approvals', async () => {
    await agent.submit('echo', { n: 1 }, { waitMs: 10_000 });
    await agent.submit('echo', { n: 2 }, { waitMs: 10_000 });
    expect((await agent.submit('fails', {}, { waitMs: 10_000 })).status).toBe('failed');
    await expect(agent.submit('count', { n: 1 })).rejects.toMatchObject({ code: 'OUT_OF_SCOPE' });
    // A Host tool without a grant is denied by the tier-based approval.
    await expect(agent.submit('host_echo', {})).rejects.toMatchObject({ code: 'APPROVAL_DENIED' });
    await agent.submit('confirm_echo', { text: 'later' }, { waitForApproval: false });

    const worker = await until('worker counts', async () => {
      const body = await (await fetch(`${workerMetrics}/metrics`)).text();
      return (sample(body, 'forge_calls_total', { tool: 'echo', outcome: 'completed' }) ?? 0) >= 2 && sample(body, 'forge_calls_total', { tool: 'fails', outcome: 'failed' }) === 1 ? body : undefined;
    });
    expect(sample(worker, 'forge_calls_total', { tool: 'echo', tier: 'platform', outcome: 'completed', role: 'worker' })).toBe(2);
    expect(sample(worker, 'forge_call_execution_seconds_count', { tool: 'echo', tier: 'platform' })).toBe(2);
    expect(sample(worker, 'forge_call_queue_wait_seconds_count', { tool: 'fails' })).toBe(1);
    expect(sample(worker, 'forge_call_duration_seconds_count', { tool: 'echo' })).toBe(2);
    // Default process metrics come along.
    expect(worker).toMatch(/^process_resident_memory_bytes\{/m);

    const dispatcher = await (await fetch(`${dispatcherUrl}/metrics`)).text();
    expect(sample(dispatcher, 'forge_calls_total', { tool: 'count', tier: 'platform', outcome: 'out_of_scope', role: 'dispatcher' })).toBe(1);
    expect(sample(dispatcher, 'forge_calls_total', { tool: 'host_echo', tier: 'host', outcome: 'denied' })).toBe(1);
    expect(sample(dispatcher, 'forge_workers', { tier: 'platform' })).toBeGreaterThanOrEqual(1);
    expect(sample(dispatcher, 'forge_workers', { tier: 'host' })).toBeGreaterThanOrEqual(1);
    expect(sample(dispatcher, 'forge_queue_jobs', { tier: 'platform', state: 'waiting' })).toBe(0);
    expect(sample(dispatcher, 'forge_approvals_pending', {})).toBeGreaterThanOrEqual(1);

    expect((await fetch(`${workerMetrics}/readyz`)).status).toBe(200);
    expect((await fetch(`${workerMetrics}/nothing-here`)).status).toBe(404);
  });

  it("puts the dispatcher's and the worker's spans of a call into the caller's trace", async () => {
    const traceId = randomUUID().replaceAll('-', '');
    const callerSpan = '1234567890abcdef';
    const id = `traced-${randomUUID()}`;
    const response = await fetch(`${dispatcherUrl}/v1/calls?wait=10000`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${await fleet.token({ subject: 'tracer', scope: ['fails', 'echo'] })}`, traceparent: `00-${traceId}-${callerSpan}-01` },
      body: JSON.stringify({ id, name: 'fails', arguments: {} }),
    });
    expect(response.status).toBe(200);

    const [dispatched, executed] = await until('both spans of the call', () => {
      const ofCall = otlp.spans.filter((s) => s.traceId === traceId);
      const d = ofCall.find((s) => s.service === 'forge-dispatcher');
      const w = ofCall.find((s) => s.service === 'forge-worker');
      return d !== undefined && w !== undefined ? [d, w] : undefined;
    });
    expect(dispatched.name).toBe('dispatch_tool fails');
    expect(dispatched.parentSpanId).toBe(callerSpan);
    expect(executed.name).toBe('execute_tool fails');
    expect(executed.parentSpanId).toBe(dispatched.spanId);
    expect(executed.attributes).toMatchObject({ 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': 'fails', 'gen_ai.tool.call.id': id, 'error.type': 'EXECUTION_FAILED' });
    expect(executed.attributes['gen_ai.tool.call.arguments']).toBeUndefined();
  });
});
