import { InMemorySpanExporter } from '@opentelemetry/sdk-trace-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setupTracing, type Tracing } from './setup.js';
import { carrierOf, ToolTracer } from './tool-spans.js';

describe('setupTracing', () => {
  it('stays off unless an exporter or an OTLP endpoint is named', async () => {
    expect((await setupTracing('t', {})).tracer).toBeUndefined();
    expect((await setupTracing('t', { OTEL_TRACES_EXPORTER: 'none', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:1' })).tracer).toBeUndefined();
    expect(new ToolTracer(await setupTracing('t', {})).dispatch({ id: 'c', name: 'echo', arguments: {} }, undefined)).toBeUndefined();
    expect(ToolTracer.of(await setupTracing('t', {}))).toBeUndefined();
  });
});

describe('carrierOf', () => {
  it('keeps a well-formed traceparent (and its tracestate) and drops anything else', () => {
    const traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    expect(carrierOf({ traceparent, tracestate: 'a=b' })).toEqual({ traceparent, tracestate: 'a=b' });
    expect(carrierOf({ traceparent: 'not-a-trace' })).toBeUndefined();
    expect(carrierOf({ traceparent: ['x'] })).toBeUndefined();
    expect(carrierOf(undefined)).toBeUndefined();
  });
});

describe('ToolTracer (GenAI execute_tool spans)', () => {
  const exporter = new InMemorySpanExporter();
  let tracing: Tracing;
  let tracer: ToolTracer;
  beforeAll(async () => {
    tracing = await setupTracing('forge-test', {}, { exporter });
    tracer = ToolTracer.of(tracing)!;
    expect(tracer).toBeInstanceOf(ToolTracer);
  });
  afterAll(() => tracing.shutdown());

  it("joins the caller's trace: dispatch span under the caller's, execute_tool under the dispatch span", async () => {
    const parent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    const call = { id: 'call-1', name: 'echo', arguments: { secret: 's3' } };
    const dispatch = tracer.dispatch(call, { traceparent: parent });
    expect(dispatch?.carrier.traceparent).toMatch(/^00-0af7651916cd43dd8448eb211c80319c-[0-9a-f]{16}-01$/);
    dispatch?.end({ decision: 'queued', tier: 'platform' });
    const ok = await tracer.execute(call, 'platform', dispatch?.carrier, () => Promise.resolve({ toolCallId: 'call-1', name: 'echo', content: 'ok', isError: false }));
    expect(ok.content).toBe('ok');
    await tracer.execute(call, 'platform', dispatch?.carrier, () => Promise.resolve({ toolCallId: 'call-1', name: 'echo', content: 'boom', isError: true, error: { code: 'EXECUTION_TIMEOUT', message: 'boom', retryable: true, details: {} } }));
    const spans = exporter.getFinishedSpans();
    const [sent, ran, failed] = spans;
    expect(spans.map((s) => s.name)).toEqual(['dispatch_tool echo', 'execute_tool echo', 'execute_tool echo']);
    expect(sent?.parentSpanContext?.spanId).toBe('b7ad6b7169203331');
    expect(ran?.parentSpanContext?.spanId).toBe(sent?.spanContext().spanId);
    expect(new Set(spans.map((s) => s.spanContext().traceId))).toEqual(new Set(['0af7651916cd43dd8448eb211c80319c']));
    expect(ran?.attributes).toMatchObject({ 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': 'echo', 'gen_ai.tool.call.id': 'call-1', 'forge.tier': 'platform' });
    expect(ran?.attributes['error.type']).toBeUndefined();
    expect(failed?.attributes['error.type']).toBe('EXECUTION_TIMEOUT');
    // Arguments and results stay out of spans unless FORGE_TRACE_CONTENT is set.
    for (const span of spans) expect(span.attributes['gen_ai.tool.call.arguments']).toBeUndefined();
  });
});
