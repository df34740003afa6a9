import { type Attributes, context, type Context, propagation, ROOT_CONTEXT, type Span, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import type { ToolResult } from '@forge-fleet/shared';
import type { Tracing } from './setup.js';

/** W3C trace context as it travels in a call envelope, an HTTP header pair or MCP `_meta`. */
export interface TraceCarrier {
  traceparent?: string | undefined;
  tracestate?: string | undefined;
}

/** The W3C `traceparent` form (version 00): malformed values are dropped, never propagated. */
const TRACEPARENT = /^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/;

/** The trace context a carrier holds, read leniently (anything malformed means "no parent"). */
export function carrierOf(source: Readonly<Record<string, unknown>> | undefined): TraceCarrier | undefined {
  const traceparent = source?.traceparent;
  if (typeof traceparent !== 'string' || !TRACEPARENT.test(traceparent)) return undefined;
  const tracestate = source?.tracestate;
  return typeof tracestate === 'string' && tracestate.length <= 512 ? { traceparent, tracestate } : { traceparent };
}

function parentOf(carrier: TraceCarrier | undefined): Context {
  return carrier === undefined ? ROOT_CONTEXT : propagation.extract(ROOT_CONTEXT, carrier);
}

function carrierFor(span: Span): TraceCarrier {
  const carrier: Record<string, string> = {};
  propagation.inject(trace.setSpan(ROOT_CONTEXT, span), carrier);
  return carrierOf(carrier) ?? {};
}

/** The `error.type` of a failed result: its fleet error code. */
function errorTypeOf(result: ToolResult): string {
  return result.error?.code ?? 'EXECUTION_FAILED';
}

/** A dispatcher's span over one call's admission and enqueueing. */
export interface DispatchSpan {
  /** The context the call's envelope carries to its worker. */
  readonly carrier: TraceCarrier;
  /** Ends the span: `error` for a refusal (its code becomes `error.type`), else the tier it was routed to. */
  end(outcome: { tier?: string; decision?: string; error?: unknown }): void;
}

/**
 * Spans of tool calls, following the OpenTelemetry GenAI conventions for
 * tool execution: `execute_tool {gen_ai.tool.name}` with
 * `gen_ai.operation.name = execute_tool`, `gen_ai.tool.name`,
 * `gen_ai.tool.call.id`, and `error.type` on failure. Arguments and results are
 * recorded (`gen_ai.tool.call.arguments`, `gen_ai.tool.call.result`) only with
 * `FORGE_TRACE_CONTENT=1`: they may hold personal or secret data.
 *
 * With tracing off every method costs a branch and nothing else.
 */
export class ToolTracer {
  constructor(private readonly tracing: Tracing) {}

  /** A tracer for the hot path: none at all while tracing is off, so callers skip even the wrapping call. */
  static of(tracing: Tracing): ToolTracer | undefined {
    return tracing.tracer === undefined ? undefined : new ToolTracer(tracing);
  }

  get enabled(): boolean {
    return this.tracing.tracer !== undefined;
  }

  /** Starts the dispatcher's span for a call, child of the caller's trace when it sent one. */
  dispatch(call: { id: string; name: string; arguments: unknown }, parent: TraceCarrier | undefined): DispatchSpan | undefined {
    const tracer = this.tracing.tracer;
    if (tracer === undefined) return undefined;
    const span = tracer.startSpan(
      `dispatch_tool ${call.name}`,
      {
        kind: SpanKind.PRODUCER,
        attributes: this.#attributes(call),
      },
      parentOf(parent),
    );
    return {
      carrier: carrierFor(span),
      end: ({ tier, decision, error }) => {
        if (tier !== undefined) span.setAttribute('forge.tier', tier);
        if (decision !== undefined) span.setAttribute('forge.decision', decision);
        if (error !== undefined) {
          const code = typeof error === 'object' && error !== null && 'code' in error ? String(error.code) : 'INTERNAL';
          span.setAttribute('error.type', code);
          span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : code });
        }
        span.end();
      },
    };
  }

  /** The GenAI attributes both spans of a call carry. */
  #attributes(call: { id: string; name: string; arguments: unknown }): Attributes {
    return {
      'gen_ai.operation.name': 'execute_tool',
      'gen_ai.tool.name': call.name,
      'gen_ai.tool.call.id': call.id,
      'gen_ai.tool.type': 'function',
      ...(this.tracing.content ? { 'gen_ai.tool.call.arguments': JSON.stringify(call.arguments) } : {}),
    };
  }

  /** Runs a call on a worker inside its `execute_tool` span, child of the dispatcher's span the envelope carries. */
  async execute(call: { id: string; name: string; arguments: unknown }, tier: string, parent: TraceCarrier | undefined, run: () => Promise<ToolResult>): Promise<ToolResult> {
    const tracer = this.tracing.tracer;
    if (tracer === undefined) return run();
    const span = tracer.startSpan(
      `execute_tool ${call.name}`,
      {
        kind: SpanKind.CONSUMER,
        attributes: { ...this.#attributes(call), 'forge.tier': tier },
      },
      parentOf(parent),
    );
    try {
      const result = await context.with(trace.setSpan(context.active(), span), run);
      if (result.isError) {
        span.setAttribute('error.type', errorTypeOf(result));
        span.setStatus({ code: SpanStatusCode.ERROR, message: result.content.slice(0, 500) });
      } else if (this.tracing.content) {
        span.setAttribute('gen_ai.tool.call.result', result.content);
      }
      return result;
    } finally {
      span.end();
    }
  }
}
