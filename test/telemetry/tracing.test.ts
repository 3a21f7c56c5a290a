import { SpanKind } from '@opentelemetry/api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { newSpanId, newTraceId } from '../../src/telemetry/trace-context.ts';
import { Tracing } from '../../src/telemetry/tracing.ts';
import { receivedSpans, startOtlpCollector, type OtlpCollector } from '../support/otlp-collector.ts';

let collector: OtlpCollector;
beforeAll(async () => {
  collector = await startOtlpCollector();
});
afterAll(() => collector.close());

describe('Tracing', () => {
  it('drops what a full queue cannot hold, and says so once rather than on every batch', async () => {
    const warnings: Array<{ obj: any; msg: string }> = [];
    const settings = loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: collector.url, OTEL_BSP_MAX_QUEUE_SIZE: '4', OTEL_BSP_SCHEDULE_DELAY: '10' }).otlp!;
    const tracing = new Tracing(settings, { warn: (obj, msg) => void warnings.push({ obj, msg }) });
    try {
      // Bursts far larger than the queue, several batches apart.
      for (let burst = 0; burst < 5; burst++) {
        for (let i = 0; i < 50; i++) tracing.startWithIds({ traceId: newTraceId(), spanId: newSpanId() }, 'invoke_agent', SpanKind.SERVER, Date.now(), {}).end();
        await new Promise((r) => setTimeout(r, 50));
      }
    } finally {
      await tracing.close();
    }
    expect(receivedSpans(collector.received).length).toBeGreaterThan(0);
    expect(receivedSpans(collector.received).length).toBeLessThan(250);
    const dropped = warnings.filter((w) => /Dropped \d+ spans/.test(w.msg));
    expect(dropped).toHaveLength(1);
  });
});
