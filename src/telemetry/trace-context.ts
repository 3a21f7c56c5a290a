import { randomFillSync } from 'node:crypto';
import { defaultTextMapGetter, isSpanContextValid, ROOT_CONTEXT, trace, TraceFlags } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';

/** W3C trace context (https://www.w3.org/TR/trace-context/): every run gets a trace and a span. */
export interface TraceContext {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  sampled: boolean;
}

const propagator = new W3CTraceContextPropagator();

/**
 * Ids come from a pool refilled a few hundred turns at a time, as `randomUUID` does for its own:
 * a call to the random generator per id cost more than the id is worth on every turn's path.
 */
const pool = Buffer.allocUnsafe(4096);
let used = pool.length;

function randomHex(bytes: number): string {
  if (used + bytes > pool.length) {
    randomFillSync(pool);
    used = 0;
  }
  used += bytes;
  return pool.toString('hex', used - bytes, used);
}

export function newSpanId(): string {
  return randomHex(8);
}

export function newTraceId(): string {
  return randomHex(16);
}

/** Continues the caller's trace when it sent a valid `traceparent` (read by OpenTelemetry's W3C propagator); an invalid one starts a new trace, as the W3C spec asks. */
export function startSpan(traceparent: string | undefined): TraceContext {
  const parent = traceparent ? trace.getSpanContext(propagator.extract(ROOT_CONTEXT, { traceparent: traceparent.trim().toLowerCase() }, defaultTextMapGetter)) : undefined;
  if (parent && isSpanContextValid(parent)) {
    return { traceId: parent.traceId, parentSpanId: parent.spanId, spanId: newSpanId(), sampled: (parent.traceFlags & TraceFlags.SAMPLED) === TraceFlags.SAMPLED };
  }
  return { traceId: newTraceId(), spanId: newSpanId(), sampled: true };
}

export function traceparentOf(ctx: TraceContext): string {
  return `00-${ctx.traceId}-${ctx.spanId}-${ctx.sampled ? '01' : '00'}`;
}

/** `data.trace` may carry `{traceparent}` or `{trace_id, span_id}`; both are read as a parent. */
export function traceparentFromData(trace: Record<string, unknown> | null | undefined): string | undefined {
  if (!trace) return undefined;
  if (typeof trace.traceparent === 'string') return trace.traceparent;
  if (typeof trace.trace_id === 'string' && typeof trace.span_id === 'string') return `00-${trace.trace_id}-${trace.span_id}-01`;
  return undefined;
}
