import { describe, expect, it } from 'vitest';
import { newSpanId, newTraceId, startSpan, traceparentOf } from '../../src/telemetry/trace-context.ts';

describe('trace and span ids', () => {
  it('are well-formed and never repeat, across many refills of their random pool', () => {
    const traces = Array.from({ length: 2000 }, newTraceId);
    const spans = Array.from({ length: 2000 }, newSpanId);
    expect(traces.every((id) => /^[0-9a-f]{32}$/.test(id))).toBe(true);
    expect(spans.every((id) => /^[0-9a-f]{16}$/.test(id))).toBe(true);
    expect(new Set([...traces, ...spans]).size).toBe(4000);
  });

  it("continue a caller's valid traceparent with a new span, and start a new trace for an invalid one", () => {
    const parent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    const continued = startSpan(parent);
    expect(continued).toMatchObject({ traceId: '0af7651916cd43dd8448eb211c80319c', parentSpanId: 'b7ad6b7169203331', sampled: true });
    expect(continued.spanId).not.toBe('b7ad6b7169203331');
    expect(traceparentOf(continued)).toBe(`00-0af7651916cd43dd8448eb211c80319c-${continued.spanId}-01`);
    for (const invalid of ['00-00000000000000000000000000000000-b7ad6b7169203331-01', 'ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01', 'nonsense']) {
      const fresh = startSpan(invalid);
      expect(fresh.traceId).not.toBe('0af7651916cd43dd8448eb211c80319c');
      expect(fresh.parentSpanId).toBeUndefined();
    }
  });
});
