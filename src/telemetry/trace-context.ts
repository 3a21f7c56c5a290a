import { randomFillSync } from 'node:crypto';

/** W3C trace context (https://www.w3.org/TR/trace-context/): every run gets a trace and a span. */
export interface TraceContext {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  sampled: boolean;
}

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;
const ZERO_TRACE = '0'.repeat(32);
const ZERO_SPAN = '0'.repeat(16);

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

/** Continues the caller's trace when it sent a valid `traceparent`; an invalid one starts a new trace, as the W3C spec asks. */
export function startSpan(traceparent: string | undefined): TraceContext {
  const match = traceparent ? TRACEPARENT.exec(traceparent.trim().toLowerCase()) : null;
  if (match && match[1] !== 'ff' && match[2] !== ZERO_TRACE && match[3] !== ZERO_SPAN) {
    return { traceId: match[2]!, parentSpanId: match[3]!, spanId: newSpanId(), sampled: (parseInt(match[4]!, 16) & 1) === 1 };
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
