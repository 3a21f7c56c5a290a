import http from 'node:http';
import { gunzipSync } from 'node:zlib';
import protobuf from 'protobufjs';

/**
 * A loopback OTLP/HTTP trace receiver: it reads both encodings a collector accepts on
 * `/v1/traces` (protobuf and JSON, gzipped or not) and keeps each request with its body decoded
 * to the OTLP JSON form, so a test reads spans the same way whatever the exporter sent.
 * No OpenTelemetry collector ships as a Debian package; the protobuf schema below is the part of
 * opentelemetry-proto's `trace/v1` and `common/v1` that spans use, with its field numbers, read
 * by protobufjs.
 */

const SCHEMA = `
syntax = "proto3";
package otlp;
message ExportTraceServiceRequest { repeated ResourceSpans resource_spans = 1; }
message ResourceSpans { Resource resource = 1; repeated ScopeSpans scope_spans = 2; string schema_url = 3; }
message ScopeSpans { InstrumentationScope scope = 1; repeated Span spans = 2; string schema_url = 3; }
message Resource { repeated KeyValue attributes = 1; uint32 dropped_attributes_count = 2; }
message InstrumentationScope { string name = 1; string version = 2; repeated KeyValue attributes = 3; uint32 dropped_attributes_count = 4; }
message Span {
  bytes trace_id = 1;
  bytes span_id = 2;
  string trace_state = 3;
  bytes parent_span_id = 4;
  fixed32 flags = 16;
  string name = 5;
  int32 kind = 6;
  fixed64 start_time_unix_nano = 7;
  fixed64 end_time_unix_nano = 8;
  repeated KeyValue attributes = 9;
  uint32 dropped_attributes_count = 10;
  repeated Event events = 11;
  uint32 dropped_events_count = 12;
  repeated Link links = 13;
  uint32 dropped_links_count = 14;
  Status status = 15;
}
message Link { bytes trace_id = 1; bytes span_id = 2; string trace_state = 3; repeated KeyValue attributes = 4; uint32 dropped_attributes_count = 5; fixed32 flags = 6; }
message Event { fixed64 time_unix_nano = 1; string name = 2; repeated KeyValue attributes = 3; uint32 dropped_attributes_count = 4; }
message Status { string message = 2; int32 code = 3; }
message KeyValue { string key = 1; AnyValue value = 2; }
message AnyValue {
  oneof value { string string_value = 1; bool bool_value = 2; int64 int_value = 3; double double_value = 4; ArrayValue array_value = 5; KeyValueList kvlist_value = 6; bytes bytes_value = 7; }
}
message ArrayValue { repeated AnyValue values = 1; }
message KeyValueList { repeated KeyValue values = 1; }
`;

const Request = protobuf.parse(SCHEMA).root.lookupType('otlp.ExportTraceServiceRequest');
const IDS = new Set(['traceId', 'spanId', 'parentSpanId']);

export interface ReceivedExport {
  path: string;
  headers: http.IncomingHttpHeaders;
  /** The body as sent, decompressed. */
  raw: Buffer;
  /** The request in the OTLP JSON form: ids in hex, 64-bit numbers as strings. */
  body: any;
}

export interface OtlpCollector {
  url: string;
  received: ReceivedExport[];
  close(): Promise<void>;
}

export async function startOtlpCollector(): Promise<OtlpCollector> {
  const received: ReceivedExport[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const sent = Buffer.concat(chunks);
      const raw = req.headers['content-encoding'] === 'gzip' ? gunzipSync(sent) : sent;
      const protobufBody = req.headers['content-type'] === 'application/x-protobuf';
      received.push({ path: req.url ?? '', headers: req.headers, raw, body: protobufBody ? fromProtobuf(raw) : JSON.parse(raw.toString('utf8')) });
      if (protobufBody) res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
      else res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    received,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

function fromProtobuf(raw: Buffer): any {
  const decoded = Request.toObject(Request.decode(raw), { longs: String, bytes: Array, arrays: true });
  return hexIds(decoded);
}

/** OTLP's JSON form writes trace and span ids as hex, where protobuf has their bytes. */
function hexIds(value: any): any {
  if (Array.isArray(value)) return value.map(hexIds);
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(Object.entries(value).map(([key, field]) => [key, IDS.has(key) ? Buffer.from(field as number[]).toString('hex') : hexIds(field)]));
}

/** Every span a collector has been sent, with the resource it came under. */
export function receivedSpans(received: ReceivedExport[]): Array<{ span: any; resource: any }> {
  return received.flatMap((r) => r.body.resourceSpans.flatMap((rs: any) => rs.scopeSpans.flatMap((ss: any) => ss.spans.map((span: any) => ({ span, resource: rs.resource })))));
}

/** A span's attributes as a plain object; integers as numbers whichever encoding carried them. */
export function attributesOf(list: Array<{ key: string; value: Record<string, unknown> }>): Record<string, unknown> {
  return Object.fromEntries(
    list.map((a) => {
      const [kind, value] = Object.entries(a.value)[0]!;
      return [a.key, kind === 'intValue' ? Number(value) : value];
    }),
  );
}
