import type { AgentEvent, Usage } from '../contract/events.ts';
import type { AttributeValue, OtlpExporter, SpanRecord } from './otlp.ts';

export interface TurnSpanStart {
  traceId: string;
  spanId: string;
  parentSpanId?: string | undefined;
  /** A turn nobody asked for over HTTP (an evaluation case) is an internal span, not a server one. */
  internal: boolean;
  startedAt: string;
  attributes: Record<string, AttributeValue | undefined>;
}

export interface TurnSpanEnd {
  status: string;
  stopReason: string | undefined;
  usage: Usage | undefined;
  error: { type: string; message: string } | undefined;
}

/**
 * One turn as one OpenTelemetry span, built from the turn's own (already redacted) events like
 * every other projection of them. Its ids are the turn's `trace_id` and `span_id`, so the trace a
 * reply names is the one the backend shows. It keeps names, ids, counts and outcomes, following
 * the GenAI semantic conventions where they have a name for it, and never a message, an input or
 * an output: what the conversation says stays in agentd's own records.
 */
export class TurnSpan {
  private readonly exporter: OtlpExporter;
  private readonly span: SpanRecord;

  constructor(exporter: OtlpExporter, start: TurnSpanStart) {
    this.exporter = exporter;
    this.span = {
      traceId: start.traceId,
      spanId: start.spanId,
      parentSpanId: start.parentSpanId,
      name: 'invoke_agent',
      kind: start.internal ? 'internal' : 'server',
      startMs: Date.parse(start.startedAt),
      endMs: 0,
      attributes: { 'gen_ai.operation.name': 'invoke_agent', ...defined(start.attributes) },
      events: [],
      status: { code: 'ok' },
    };
  }

  event(event: AgentEvent): void {
    const at = Date.now();
    switch (event.type) {
      case 'tool_call':
        this.span.events.push({ name: 'tool_call', timeMs: at, attributes: { 'gen_ai.tool.name': event.data.name, 'gen_ai.tool.call.id': event.data.id } });
        break;
      case 'tool_result':
        this.span.events.push({
          name: 'tool_result',
          timeMs: at,
          attributes: { 'gen_ai.tool.call.id': event.data.id, 'agentd.tool.is_error': event.data.is_error, ...(event.data.denied ? { 'agentd.tool.denied': true } : {}) },
        });
        break;
      case 'interaction_request':
        this.span.events.push({
          name: 'interaction_request',
          timeMs: at,
          attributes: { 'agentd.interaction.id': event.data.id, 'agentd.interaction.kind': event.data.kind, 'gen_ai.tool.name': event.data.tool },
        });
        break;
      default:
        break;
    }
  }

  end(outcome: TurnSpanEnd): void {
    const span = this.span;
    span.endMs = Date.now();
    Object.assign(
      span.attributes,
      defined({
        'agentd.turn.status': outcome.status,
        'agentd.turn.stop_reason': outcome.stopReason,
        'gen_ai.usage.input_tokens': outcome.usage?.input,
        'gen_ai.usage.output_tokens': outcome.usage?.output,
        'agentd.usage.cost': outcome.usage?.cost,
        'error.type': outcome.error?.type,
      }),
    );
    if (outcome.error) span.status = { code: 'error', message: outcome.error.message };
    this.exporter.add(span);
  }
}

function defined(values: Record<string, AttributeValue | undefined>): Record<string, AttributeValue> {
  const out: Record<string, AttributeValue> = {};
  for (const [key, value] of Object.entries(values)) if (value !== undefined) out[key] = value;
  return out;
}
