import { diag, DiagConsoleLogger, DiagLogLevel, type Tracer, trace } from '@opentelemetry/api';
import type * as SdkModule from '@opentelemetry/sdk-trace-node';
import type { Sampler, SpanExporter, SpanProcessor } from '@opentelemetry/sdk-trace-node';

// The SDK, the OTLP exporter and its protobuf encoder are loaded only when tracing is on: a process that traces
// nothing should not carry them (they cost a dispatcher tens of MB of heap).
type Sdk = typeof SdkModule;

/** A process's tracing: off (no exporter configured) or exporting spans. */
export interface Tracing {
  /** Undefined when tracing is off: callers then skip span work entirely. */
  readonly tracer: Tracer | undefined;
  /** Whether span attributes may carry tool arguments and results (`FORGE_TRACE_CONTENT=1`). */
  readonly content: boolean;
  /** Exports what is buffered, then stops. */
  shutdown(): Promise<void>;
}

const OFF: Tracing = Object.freeze({ tracer: undefined, content: false, shutdown: async () => {} });

function samplerOf(sdk: Sdk, env: NodeJS.ProcessEnv): Sampler {
  const { AlwaysOffSampler, AlwaysOnSampler, ParentBasedSampler, TraceIdRatioBasedSampler } = sdk;
  const ratio = Number(env.OTEL_TRACES_SAMPLER_ARG ?? '1');
  const fraction = Number.isFinite(ratio) && ratio >= 0 && ratio <= 1 ? ratio : 1;
  switch (env.OTEL_TRACES_SAMPLER) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return new TraceIdRatioBasedSampler(fraction);
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(fraction) });
    default:
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
  }
}

/**
 * Sets up tracing from the standard `OTEL_*` variables: `OTEL_TRACES_EXPORTER`
 * (`otlp`, `console`, `none`; a comma list), `OTEL_EXPORTER_OTLP_ENDPOINT` /
 * `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (OTLP over HTTP with JSON bodies),
 * `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER(_ARG)`.
 *
 * Unlike the SDK's default (`otlp` to localhost:4318), tracing stays off
 * unless an exporter or an endpoint is named: a fleet without a collector
 * should not spend CPU on spans nobody receives, nor log export failures.
 * Registers the W3C trace-context propagator globally.
 */
export async function setupTracing(serviceName: string, env: NodeJS.ProcessEnv = process.env, extra: { exporter?: SpanExporter } = {}): Promise<Tracing> {
  const named = (env.OTEL_TRACES_EXPORTER ?? '').split(',').map((s) => s.trim()).filter((s) => s !== '' && s !== 'none');
  const endpoint = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? env.OTEL_EXPORTER_OTLP_ENDPOINT;
  const exporters = named.length > 0 ? named : endpoint !== undefined && env.OTEL_TRACES_EXPORTER !== 'none' ? ['otlp'] : [];
  if (exporters.length === 0 && extra.exporter === undefined) return OFF;
  const sdk = await import('@opentelemetry/sdk-trace-node');
  const { BatchSpanProcessor, ConsoleSpanExporter, NodeTracerProvider, SimpleSpanProcessor } = sdk;
  const processors: SpanProcessor[] = [];
  for (const name of exporters) {
    if (name === 'otlp') {
      const { OTLPTraceExporter } = await import('@opentelemetry/exporter-trace-otlp-http');
      processors.push(new BatchSpanProcessor(new OTLPTraceExporter(), { scheduledDelayMillis: 500 }));
    } else if (name === 'console') processors.push(new SimpleSpanProcessor(new ConsoleSpanExporter()));
    else diag.warn(`OTEL_TRACES_EXPORTER '${name}' is not supported here (otlp, console, none)`);
  }
  if (extra.exporter !== undefined) processors.push(new SimpleSpanProcessor(extra.exporter));
  if (processors.length === 0) return OFF;
  if (env.OTEL_LOG_LEVEL === 'debug') diag.setLogger(new DiagConsoleLogger(), DiagLogLevel.DEBUG);

  const { detectResources, envDetector, resourceFromAttributes } = await import('@opentelemetry/resources');
  const resource = resourceFromAttributes({ 'service.name': env.OTEL_SERVICE_NAME ?? serviceName }).merge(detectResources({ detectors: [envDetector] }));
  const provider = new NodeTracerProvider({ resource, sampler: samplerOf(sdk, env), spanProcessors: processors });
  provider.register();
  return {
    tracer: trace.getTracer('forge-fleet'),
    content: env.FORGE_TRACE_CONTENT === '1' || env.FORGE_TRACE_CONTENT === 'true',
    shutdown: () => provider.shutdown(),
  };
}
