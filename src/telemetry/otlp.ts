import { keepAliveFetch } from '../keep-alive-fetch.ts';
import { VERSION } from '../version.ts';

/**
 * Spans exported over OTLP/HTTP with the JSON encoding (https://opentelemetry.io/docs/specs/otlp/),
 * which every OpenTelemetry collector and most tracing backends accept on `/v1/traces`. Spans wait
 * in a bounded queue and go out in batches, so a slow or absent collector costs a turn nothing;
 * what cannot be sent is dropped and counted in a warning, never retried into a growing backlog.
 */

export interface OtlpSettings {
  /** The full traces URL, e.g. `http://collector:4318/v1/traces`. */
  url: string;
  /** Sent with every export (a backend's API key): never logged. */
  headers: Record<string, string>;
  serviceName: string;
  /** How long spans wait before a batch goes out (OTEL_BSP_SCHEDULE_DELAY). */
  scheduleDelayMs: number;
}

export type AttributeValue = string | number | boolean;

export interface SpanRecord {
  traceId: string;
  spanId: string;
  parentSpanId?: string | undefined;
  name: string;
  kind: 'server' | 'internal' | 'client';
  startMs: number;
  endMs: number;
  attributes: Record<string, AttributeValue>;
  events: Array<{ name: string; timeMs: number; attributes: Record<string, AttributeValue> }>;
  status: { code: 'ok' | 'error'; message?: string };
}

/** The queue's bound: beyond it, spans are dropped rather than held while a collector is down. */
const MAX_QUEUE = 2048;
/** Spans per request. */
const MAX_BATCH = 512;
const KIND = { internal: 1, server: 2, client: 3 } as const;
const STATUS = { ok: 1, error: 2 } as const;

export class OtlpExporter {
  private readonly settings: OtlpSettings;
  private readonly log: { warn(obj: object, msg: string): void };
  private queue: SpanRecord[] = [];
  private dropped = 0;
  private sending: Promise<void> = Promise.resolve();
  private readonly timer: NodeJS.Timeout;
  /** The URL as logs show it: a user name or password in it stays out of them. */
  private readonly shownUrl: string;

  constructor(settings: OtlpSettings, log: { warn(obj: object, msg: string): void }) {
    this.settings = settings;
    this.log = log;
    const shown = new URL(settings.url);
    shown.username = '';
    shown.password = '';
    this.shownUrl = shown.href;
    this.timer = setInterval(() => void this.flush(), settings.scheduleDelayMs);
    this.timer.unref();
  }

  add(span: SpanRecord): void {
    if (this.queue.length >= MAX_QUEUE) {
      this.dropped++;
      return;
    }
    this.queue.push(span);
    if (this.queue.length >= MAX_BATCH) void this.flush();
  }

  /** Sends what is queued; resolves when it has been sent (or given up on). Never rejects. */
  flush(): Promise<void> {
    this.sending = this.sending.then(async () => {
      while (this.queue.length > 0) {
        const batch = this.queue.splice(0, MAX_BATCH);
        await this.send(batch);
      }
      if (this.dropped > 0) {
        this.log.warn({ dropped: this.dropped, url: this.shownUrl }, 'OpenTelemetry spans were dropped: the export queue was full (is the collector reachable?)');
        this.dropped = 0;
      }
    });
    return this.sending;
  }

  /** For a shutdown: the last spans go out before the process ends. */
  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
  }

  private async send(batch: SpanRecord[]): Promise<void> {
    try {
      const res = await keepAliveFetch(this.settings.url, {
        method: 'POST',
        headers: { ...this.settings.headers, 'content-type': 'application/json' },
        body: JSON.stringify(encode(batch, this.settings.serviceName)),
        signal: AbortSignal.timeout(10_000),
      });
      await res.arrayBuffer();
      if (!res.ok) this.log.warn({ status: res.status, spans: batch.length, url: this.shownUrl }, 'the OpenTelemetry collector refused a batch of spans; they are dropped');
    } catch (error) {
      this.log.warn({ err: { message: (error as Error).message }, spans: batch.length, url: this.shownUrl }, 'could not send spans to the OpenTelemetry collector; they are dropped');
    }
  }
}

/** An `ExportTraceServiceRequest` in OTLP's JSON mapping: ids in hex, times as decimal strings of nanoseconds. */
function encode(spans: readonly SpanRecord[], serviceName: string) {
  return {
    resourceSpans: [
      {
        resource: { attributes: attributes({ 'service.name': serviceName, 'service.version': VERSION }) },
        scopeSpans: [
          {
            scope: { name: 'agentd', version: VERSION },
            spans: spans.map((span) => ({
              traceId: span.traceId,
              spanId: span.spanId,
              ...(span.parentSpanId ? { parentSpanId: span.parentSpanId } : {}),
              name: span.name,
              kind: KIND[span.kind],
              startTimeUnixNano: nanos(span.startMs),
              endTimeUnixNano: nanos(span.endMs),
              attributes: attributes(span.attributes),
              events: span.events.map((event) => ({ name: event.name, timeUnixNano: nanos(event.timeMs), attributes: attributes(event.attributes) })),
              status: { code: STATUS[span.status.code], ...(span.status.message ? { message: span.status.message } : {}) },
            })),
          },
        ],
      },
    ],
  };
}

function attributes(values: Record<string, AttributeValue>) {
  return Object.entries(values).map(([key, value]) => ({
    key,
    value:
      typeof value === 'string'
        ? { stringValue: value }
        : typeof value === 'boolean'
          ? { boolValue: value }
          : Number.isInteger(value)
            ? { intValue: String(value) }
            : { doubleValue: value },
  }));
}

function nanos(ms: number): string {
  const whole = Math.trunc(ms);
  return (BigInt(whole) * 1_000_000n + BigInt(Math.round((ms - whole) * 1e6))).toString();
}
