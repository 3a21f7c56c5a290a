import { OpenTelemetry } from '@ai-sdk/otel';
import { context, diag, DiagLogLevel, type DiagLogger, ROOT_CONTEXT, SpanKind, TraceFlags, trace, type Context, type Link, type Tracer } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { ExportResultCode, setGlobalErrorHandler, type ExportResult } from '@opentelemetry/core';
import { OTLPTraceExporter as JsonTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as ProtobufTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { CompressionAlgorithm } from '@opentelemetry/otlp-exporter-base';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { AlwaysOnSampler, BatchSpanProcessor, RandomIdGenerator, TracerProvider, type IdGenerator, type ReadableSpan, type SpanExporter } from '@opentelemetry/sdk-trace';
import { makeRoom } from '../bounded.ts';
import { makeRedactor } from './redact.ts';
import { VERSION } from '../version.ts';

/**
 * OpenTelemetry export through the OpenTelemetry JS SDK: a batch span processor (bounded queue:
 * a slow or absent collector costs a turn nothing, and what cannot be queued is dropped) in front
 * of the OTLP/HTTP exporter, with the JSON or the protobuf encoding, which retries what a
 * collector asks to have retried. The settings are the standard `OTEL_*` variables, read by
 * config.ts like every other setting.
 */

export interface OtlpSettings {
  /** The full traces URL, e.g. `http://collector:4318/v1/traces`. */
  url: string;
  protocol: 'http/json' | 'http/protobuf';
  /** Sent with every export (a backend's API key): never logged. */
  headers: Record<string, string>;
  compression: 'gzip' | 'none';
  /** One export request's limit (OTEL_EXPORTER_OTLP_TIMEOUT). */
  timeoutMs: number;
  serviceName: string;
  /** Extra resource attributes (OTEL_RESOURCE_ATTRIBUTES). */
  resource: Record<string, string>;
  /** The batch processor's settings (OTEL_BSP_*). */
  batch: { scheduleDelayMs: number; maxQueueSize: number; maxExportBatchSize: number; exportTimeoutMs: number };
}

export interface Logger {
  warn(obj: object, msg: string): void;
}

/** The ids a span is to have: a turn's span is the one its reply and its record already name. */
export interface SpanIds {
  traceId: string;
  spanId: string;
  parentSpanId?: string | undefined;
}

export class Tracing {
  readonly tracer: Tracer;
  /**
   * The AI SDK's own OpenTelemetry integration on this tracer, for the calls agentd makes through
   * `generateText` (the `llm_judge` evaluator): their spans join the trace they run under.
   */
  readonly aiSdk: OpenTelemetry;
  private readonly provider: TracerProvider;
  private readonly ids = new TurnIds();
  private readonly log: Logger;
  private readonly url: string;
  private readonly quiet: Quiet;

  constructor(settings: OtlpSettings, log: Logger) {
    this.log = log;
    this.url = settings.url;
    this.quiet = quietFor(settings);
    routeDiagnostics(log, this.quiet);
    const exporterSettings = { url: settings.url, headers: settings.headers, timeoutMillis: settings.timeoutMs, compression: settings.compression === 'gzip' ? CompressionAlgorithm.GZIP : CompressionAlgorithm.NONE };
    const encoded = settings.protocol === 'http/protobuf' ? new ProtobufTraceExporter(exporterSettings) : new JsonTraceExporter(exporterSettings);
    const exporter = new ReportingExporter(encoded, log, settings.url, this.quiet);
    this.provider = new TracerProvider({
      resource: resourceFromAttributes({ ...settings.resource, 'service.name': settings.serviceName, 'service.version': VERSION }),
      // agentd decides which turns are traced (the caller's sampled flag) before it makes a span.
      sampler: new AlwaysOnSampler(),
      idGenerator: this.ids,
      spanProcessors: [
        new BatchSpanProcessor({
          exporter,
          scheduledDelayMillis: settings.batch.scheduleDelayMs,
          maxQueueSize: settings.batch.maxQueueSize,
          maxExportBatchSize: settings.batch.maxExportBatchSize,
          exportTimeoutMillis: settings.batch.exportTimeoutMs,
        }),
      ],
    });
    this.tracer = this.provider.getTracer('agentd', VERSION);
    this.aiSdk = new OpenTelemetry({ tracer: this.tracer });
    // The AI SDK finds its parent span in the active context, which only a context manager carries
    // across awaits; the OpenTelemetry API takes one per process.
    contextManaged ||= context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  }

  /** Runs `work` with the span `parent` names as the active one, so spans made inside are its children. */
  within<T>(parent: SpanIds, work: () => T): T {
    return context.with(trace.setSpanContext(ROOT_CONTEXT, { traceId: parent.traceId, spanId: parent.spanId, traceFlags: TraceFlags.SAMPLED }), work);
  }

  /** A span with ids chosen beforehand, under its parent's trace when it has one. */
  startWithIds(ids: SpanIds, name: string, kind: SpanKind, startMs: number, attributes: Record<string, string | number | boolean>, links: Link[] = []) {
    const parent = ids.parentSpanId ? trace.setSpanContext(ROOT_CONTEXT, { traceId: ids.traceId, spanId: ids.parentSpanId, traceFlags: TraceFlags.SAMPLED, isRemote: true }) : ROOT_CONTEXT;
    return this.ids.next(ids, () => this.tracer.startSpan(name, { kind, startTime: startMs, attributes, links }, parent));
  }

  /** A child of `parent` that started and ended in the past (a model call or a tool run, as a turn's events recover them). */
  record(parent: Context, name: string, kind: SpanKind, startMs: number) {
    return this.tracer.startSpan(name, { kind, startTime: startMs }, parent);
  }

  /**
   * For a shutdown: the last spans go out before the process ends. A collector that cannot take
   * them loses them, as it loses any batch, with a warning: the SDK rejects the shutdown then,
   * which would end a stopping server with an uncaught error before it closed its database.
   */
  async close(): Promise<void> {
    await this.provider.shutdown().catch((error: unknown) => {
      if (typeof error === 'object' && error !== null && reported.has(error)) return;
      this.log.warn({ url: shown(this.url), error: this.quiet(error instanceof Error ? error.message : String(error)) }, 'OpenTelemetry: could not send the last spans at shutdown; they are dropped');
    });
  }
}

/** Random ids, except for the one span being started with ids of its own. */
class TurnIds implements IdGenerator {
  private readonly random = new RandomIdGenerator();
  private wanted: SpanIds | undefined;

  next<T>(ids: SpanIds, start: () => T): T {
    this.wanted = ids;
    try {
      return start();
    } finally {
      this.wanted = undefined;
    }
  }

  generateTraceId(): string {
    return this.wanted?.traceId ?? this.random.generateTraceId();
  }

  generateSpanId(): string {
    return this.wanted?.spanId ?? this.random.generateSpanId();
  }
}

let contextManaged = false;

/** Export failures already in the log, which the SDK's global error handler is then handed again. */
const reported = new WeakSet<object>();

/**
 * Says in agentd's log when a batch could not be sent (after the exporter's own retries): how many
 * spans were lost and to which collector, its URL's credentials left out.
 */
class ReportingExporter implements SpanExporter {
  private readonly exporter: SpanExporter;
  private readonly log: Logger;
  private readonly url: string;
  private readonly quiet: Quiet;

  constructor(exporter: SpanExporter, log: Logger, url: string, quiet: Quiet) {
    this.exporter = exporter;
    this.log = log;
    this.url = url;
    this.quiet = quiet;
  }

  export(spans: ReadableSpan[], done: (result: ExportResult) => void): void {
    this.exporter.export(spans, (result) => {
      if (result.code === ExportResultCode.SUCCESS) return done(result);
      const error = result.error ?? new Error('the collector did not accept them');
      reported.add(error);
      this.log.warn({ spans: spans.length, url: shown(this.url), error: this.quiet(error.message) }, 'OpenTelemetry: could not send spans; they are dropped');
      done({ code: result.code, error });
    });
  }

  shutdown(): Promise<void> {
    return this.exporter.shutdown();
  }

  forceFlush(): Promise<void> {
    return this.exporter.forceFlush?.() ?? Promise.resolve();
  }
}

/** The collector's URL as logs may show it: a user name or password in it stays out. */
function shown(url: string): string {
  const parsed = new URL(url);
  parsed.username = '';
  parsed.password = '';
  return parsed.href;
}

/** Text about an export as logs may show it. */
type Quiet = (text: string) => string;

/**
 * Leaves out the collector URL's credentials and masks the values of the headers sent with every
 * export (OTEL_EXPORTER_OTLP_HEADERS, a backend's API key): a collector or a proxy in front of it
 * may repeat a request's headers in its refusal, whose reason phrase becomes the error's message.
 */
function quietFor(settings: Pick<OtlpSettings, 'url' | 'headers'>): Quiet {
  const { username, password } = new URL(settings.url);
  const redact = makeRedactor(Object.values(settings.headers));
  return (text) => redact(username || password ? text.replaceAll(`${username}:${password}@`, '') : text);
}


/** A warning of one kind is said at most this often: a queue overflowing under load warns on every batch. */
const REPEAT_MS = 10_000;
/** Kinds of warning kept for their count: a message with a changing text (an address, an error's words) is a new kind each time. */
const KINDS_REMEMBERED = 100;

/**
 * The SDK's own warnings (a full queue dropping spans, a batch that timed out) and errors go
 * through its process-wide diagnostics logger and error handler: both lead to agentd's log, each
 * kind of warning at most once per REPEAT_MS with a count of those left unsaid.
 */
function routeDiagnostics(log: Logger, quiet: Quiet): void {
  const text = (arg: unknown): string => quiet(arg instanceof Error ? arg.message : typeof arg === 'string' ? arg : (JSON.stringify(arg) ?? String(arg)));
  const said = new Map<string, { atMs: number; unsaid: number }>();
  const say = (message: string, ...args: unknown[]): void => {
    const kind = message.replace(/\d+/g, 'N');
    const last = said.get(kind);
    const now = Date.now();
    if (last && now - last.atMs < REPEAT_MS) {
      last.unsaid++;
      return;
    }
    if (!last) makeRoom(said, KINDS_REMEMBERED);
    said.set(kind, { atMs: now, unsaid: 0 });
    log.warn({ opentelemetry: args.map(text), ...(last?.unsaid ? { unsaid: last.unsaid } : {}) }, `OpenTelemetry: ${text(message)}`);
  };
  const logger: DiagLogger = { error: say, warn: say, info: () => {}, debug: () => {}, verbose: () => {} };
  diag.setLogger(logger, { logLevel: DiagLogLevel.WARN, suppressOverrideMessage: true });
  setGlobalErrorHandler((error) => {
    if (typeof error === 'object' && error !== null && reported.has(error)) return;
    say('an error in exporting spans', error);
  });
}
