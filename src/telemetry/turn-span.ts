import type { AgentEvent, Usage } from '../contract/events.ts';
import { newSpanId } from './trace-context.ts';
import type { AttributeValue, OtlpExporter, SpanRecord } from './otlp.ts';
import { TurnTimeline, type ToolResult } from './turn-timeline.ts';

export interface TurnSpanStart {
  traceId: string;
  spanId: string;
  parentSpanId?: string | undefined;
  /** A turn nobody asked for over HTTP (an evaluation case) is an internal span, not a server one. */
  internal: boolean;
  startedAt: string;
  attributes: Record<string, AttributeValue | undefined>;
  /** Calls of the conversation this turn may settle (a continuation's): their tools run from its start. */
  calls: ReadonlyArray<{ toolCallId: string; toolName: string }>;
}

export interface TurnSpanEnd {
  status: string;
  stopReason: string | undefined;
  usage: Usage | undefined;
  error: { type: string; message: string } | undefined;
}

/** What the model was asked in this turn: a model call's span carries it. */
const MODEL_ATTRIBUTES = ['gen_ai.provider.name', 'gen_ai.request.model'] as const;

/**
 * One turn as an OpenTelemetry span, built from the turn's own (already redacted) events like
 * every other projection of them, with a child span for each model call and each tool it ran (as
 * its timeline recovers them). Its ids are the turn's `trace_id` and `span_id`, so the trace a
 * reply names is the one the backend shows. It keeps names, ids, counts and outcomes, following
 * the GenAI semantic conventions where they have a name for it, and never a message, an input or
 * an output: what the conversation says stays in agentd's own records.
 */
export class TurnSpan {
  private readonly exporter: OtlpExporter;
  private readonly span: SpanRecord;
  private readonly timeline: TurnTimeline;

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
    this.timeline = new TurnTimeline(this.span.startMs, start.calls, { modelCall: (s, e, error) => this.modelSpan(s, e, error), toolRun: (result, call, at) => this.toolSpan(result, call, at) });
  }

  event(event: AgentEvent): void {
    const at = Date.now();
    this.timeline.event(event, at);
    if (event.type === 'interaction_request') {
      this.span.events.push({
        name: 'interaction_request',
        timeMs: at,
        attributes: { 'agentd.interaction.id': event.data.id, 'agentd.interaction.kind': event.data.kind, 'gen_ai.tool.name': event.data.tool },
      });
    }
  }

  private toolSpan(result: ToolResult, call: { name: string; atMs: number } | undefined, atMs: number): void {
    const failed = result.is_error && !result.denied;
    this.exporter.add({
      traceId: this.span.traceId,
      spanId: newSpanId(),
      parentSpanId: this.span.spanId,
      name: call ? `execute_tool ${call.name}` : 'execute_tool',
      kind: 'internal',
      startMs: call?.atMs ?? this.span.startMs,
      endMs: atMs,
      attributes: defined({
        'gen_ai.operation.name': 'execute_tool',
        'gen_ai.tool.name': call?.name,
        'gen_ai.tool.call.id': result.id,
        'agentd.tool.is_error': result.is_error,
        'agentd.tool.denied': result.denied,
        'error.type': failed ? 'tool_error' : undefined,
      }),
      events: [],
      status: failed ? { code: 'error' } : { code: 'ok' },
    });
  }

  private modelSpan(startMs: number, endMs: number, error?: TurnSpanEnd['error']): void {
    const model = this.span.attributes['gen_ai.request.model'];
    this.exporter.add({
      traceId: this.span.traceId,
      spanId: newSpanId(),
      parentSpanId: this.span.spanId,
      name: model === undefined ? 'chat' : `chat ${model}`,
      kind: 'client',
      startMs,
      endMs,
      attributes: defined({
        'gen_ai.operation.name': 'chat',
        ...Object.fromEntries(MODEL_ATTRIBUTES.map((key) => [key, this.span.attributes[key]])),
        'error.type': error?.type,
      }),
      events: [],
      status: error ? { code: 'error', message: error.message } : { code: 'ok' },
    });
  }

  end(outcome: TurnSpanEnd): void {
    const span = this.span;
    span.endMs = Date.now();
    this.timeline.end(span.endMs, outcome.error);
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
