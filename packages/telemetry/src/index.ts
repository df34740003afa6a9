export { FleetMetrics, outcomeOf, type CallOutcome, type ScrapeSources } from './metrics/fleet-metrics.js';
export { MeteredAuditLogger } from './metrics/metered-audit.js';
export { serveMetrics, type MetricsServer, type ReadyReport } from './metrics/metrics-server.js';
export { setupTracing, type Tracing } from './tracing/setup.js';
export { carrierOf, ToolTracer, type DispatchSpan, type TraceCarrier } from './tracing/tool-spans.js';
