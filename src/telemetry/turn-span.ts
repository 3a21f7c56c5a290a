import { ROOT_CONTEXT, SpanKind, SpanStatusCode, TraceFlags, trace, type Context, type Link, type Span } from '@opentelemetry/api';
import type { AgentEvent, Usage } from '../contract/events.ts';
import type { SpanIds, Tracing } from './tracing.ts';
import { TurnTimeline, type ToolResult } from './turn-timeline.ts';

type AttributeValue = string | number | boolean;

export interface TurnSpanStart extends SpanIds {
  /** A turn nobody asked for over HTTP (an evaluation case) is an internal span, not a server one. */
  internal: boolean;
  startedAt: string;
  attributes: Record<string, AttributeValue | undefined>;
  /** Calls of the conversation this turn may settle (a continuation's): their tools run from its start. */
  calls: ReadonlyArray<{ toolCallId: string; toolName: string }>;
  /** The request's `links` (spec §2.1), by name: other runs this one relates to. */
  links?: unknown;
  /**
   * The paused turn this one goes on from, when that is not its parent: an answer in band runs
   * under the caller's trace (or a new one), which the link leads back to the pause from.
   */
  continues?: { traceId: string; spanId: string } | undefined;
}

export interface TurnSpanEnd {
  status: string;
  stopReason: string | undefined;
  usage: Usage | undefined;
  error: { type: string; message: string } | undefined;
}

/**
 * One turn as an OpenTelemetry span, built from the turn's own (already redacted) events like
 * every other projection of them, with a child span for each model call and each tool it ran (as
 * its timeline recovers them). Its ids are the turn's `trace_id` and `span_id`, so the trace a
 * reply names is the one the backend shows. It keeps names, ids, counts and outcomes, following
 * the GenAI semantic conventions where they have a name for it, and never a message, an input or
 * an output: what the conversation says stays in agentd's own records.
 */
export class TurnSpan {
  private readonly tracing: Tracing;
  private readonly span: Span;
  /** The turn span as its children's parent. */
  readonly context: Context;
  private readonly startMs: number;
  private readonly model: { provider?: AttributeValue | undefined; name?: AttributeValue | undefined };
  private readonly timeline: TurnTimeline;

  constructor(tracing: Tracing, start: TurnSpanStart) {
    this.tracing = tracing;
    this.startMs = Date.parse(start.startedAt);
    this.model = { provider: start.attributes['gen_ai.provider.name'], name: start.attributes['gen_ai.request.model'] };
    this.span = tracing.startWithIds(start, 'invoke_agent', start.internal ? SpanKind.INTERNAL : SpanKind.SERVER, this.startMs, { 'gen_ai.operation.name': 'invoke_agent', ...defined(start.attributes) }, spanLinks(start.links, start.continues));
    this.context = trace.setSpan(ROOT_CONTEXT, this.span);
    this.timeline = new TurnTimeline(this.startMs, start.calls, { modelCall: (s, e, error) => this.modelSpan(s, e, error), toolRun: (result, call, at) => this.toolSpan(result, call, at) });
  }

  event(event: AgentEvent): void {
    const at = Date.now();
    this.timeline.event(event, at);
    if (event.type === 'interaction_request') {
      this.span.addEvent('interaction_request', { 'agentd.interaction.id': event.data.id, 'agentd.interaction.kind': event.data.kind, 'gen_ai.tool.name': event.data.tool }, at);
    }
  }

  private toolSpan(result: ToolResult, call: { name: string; atMs: number } | undefined, atMs: number): void {
    const failed = result.is_error && !result.denied;
    const span = this.tracing.record(this.context, call ? `execute_tool ${call.name}` : 'execute_tool', SpanKind.INTERNAL, call?.atMs ?? this.startMs);
    span.setAttributes(
      defined({
        'gen_ai.operation.name': 'execute_tool',
        'gen_ai.tool.name': call?.name,
        'gen_ai.tool.call.id': result.id,
        'agentd.tool.is_error': result.is_error,
        'agentd.tool.denied': result.denied,
        'error.type': failed ? 'tool_error' : undefined,
      }),
    );
    span.setStatus({ code: failed ? SpanStatusCode.ERROR : SpanStatusCode.OK });
    span.end(atMs);
  }

  private modelSpan(startMs: number, endMs: number, error?: TurnSpanEnd['error']): void {
    const span = this.tracing.record(this.context, this.model.name === undefined ? 'chat' : `chat ${this.model.name}`, SpanKind.CLIENT, startMs);
    span.setAttributes(defined({ 'gen_ai.operation.name': 'chat', 'gen_ai.provider.name': this.model.provider, 'gen_ai.request.model': this.model.name, 'error.type': error?.type }));
    span.setStatus(error ? { code: SpanStatusCode.ERROR, message: error.message } : { code: SpanStatusCode.OK });
    span.end(endMs);
  }

  end(outcome: TurnSpanEnd): void {
    const endMs = Date.now();
    this.timeline.end(endMs, outcome.error);
    this.span.setAttributes(
      defined({
        'agentd.turn.status': outcome.status,
        'agentd.turn.stop_reason': outcome.stopReason,
        'gen_ai.usage.input_tokens': outcome.usage?.input,
        'gen_ai.usage.output_tokens': outcome.usage?.output,
        'agentd.usage.cost': outcome.usage?.cost,
        'error.type': outcome.error?.type,
      }),
    );
    this.span.setStatus(outcome.error ? { code: SpanStatusCode.ERROR, message: outcome.error.message } : { code: SpanStatusCode.OK });
    this.span.end(endMs);
  }
}

function defined(values: Record<string, AttributeValue | undefined>): Record<string, AttributeValue> {
  const out: Record<string, AttributeValue> = {};
  for (const [key, value] of Object.entries(values)) if (value !== undefined) out[key] = value;
  return out;
}

/** Enough of a request's `tags` and `meta` for a trace to be found by them, not a copy of a payload. */
const REQUEST_ATTRIBUTES = { perField: 64, chars: 1_000 } as const;

/**
 * A request's `tags` and `meta` (spec §2.1: "recorded on the trace") as `agentd.tags.<key>` and
 * `agentd.meta.<key>`: a string, number or boolean as it is, anything else as its JSON, each cut
 * to REQUEST_ATTRIBUTES.chars, and the first REQUEST_ATTRIBUTES.perField of each. The caller gives
 * the request as stored, its secrets already masked.
 */
export function requestAttributes(request: { tags?: unknown; meta?: unknown }): Record<string, AttributeValue> {
  const out: Record<string, AttributeValue> = {};
  for (const field of ['tags', 'meta'] as const) {
    const pairs = request[field];
    if (pairs === null || typeof pairs !== 'object') continue;
    for (const [key, value] of Object.entries(pairs).slice(0, REQUEST_ATTRIBUTES.perField)) {
      if (value === null || value === undefined) continue;
      const plain = typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean' ? value : JSON.stringify(value);
      out[`agentd.${field}.${key}`] = typeof plain === 'string' ? plain.slice(0, REQUEST_ATTRIBUTES.chars) : plain;
    }
  }
  return out;
}

/** The request's `links` as span links; a pair whose ids are not a trace's and a span's is left out. */
function spanLinks(links: unknown, continues: TurnSpanStart['continues']): Link[] {
  const out: Link[] = continues ? [{ context: { ...continues, traceFlags: TraceFlags.SAMPLED, isRemote: true }, attributes: { 'agentd.link.name': 'continues' } }] : [];
  if (links === null || typeof links !== 'object') return out;
  for (const [name, link] of Object.entries(links)) {
    const { trace_id: traceId, span_id: spanId } = (link ?? {}) as { trace_id?: unknown; span_id?: unknown };
    if (typeof traceId !== 'string' || typeof spanId !== 'string') continue;
    const context = { traceId: traceId.toLowerCase(), spanId: spanId.toLowerCase(), traceFlags: TraceFlags.SAMPLED, isRemote: true };
    if (trace.isSpanContextValid(context)) out.push({ context, attributes: { 'agentd.link.name': name } });
  }
  return out;
}
