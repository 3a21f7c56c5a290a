import type { AgentEvent, EventOf, Usage } from '../contract/events.ts';
import { newSpanId } from './trace-context.ts';
import type { AttributeValue, OtlpExporter, SpanRecord } from './otlp.ts';

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

/** Native events that are the model's own output (as opposed to tools' results and the turn's bookkeeping). */
const MODEL_OUTPUT = new Set<AgentEvent['type']>(['message_start', 'message_delta', 'message_end', 'thought_start', 'thought_delta', 'thought_end', 'tool_call']);

/**
 * One turn as an OpenTelemetry span, built from the turn's own (already redacted) events like
 * every other projection of them, with a child span for each model call and each tool it ran.
 * Its ids are the turn's `trace_id` and `span_id`, so the trace a reply names is the one the
 * backend shows. It keeps names, ids, counts and outcomes, following the GenAI semantic
 * conventions where they have a name for it, and never a message, an input or an output: what the
 * conversation says stays in agentd's own records.
 *
 * The events do not mark model calls, so they are recovered as the Vercel stream recovers steps
 * (src/stream/steps.ts): the model is asked when the turn starts, and again once every call of
 * its last answer has its result; that call lasts until its answer's last output. A tool that
 * finishes while the model still streams the same answer splits that call's span in two.
 */
export class TurnSpan {
  private readonly exporter: OtlpExporter;
  private readonly span: SpanRecord;
  /** When each call of this turn was made, and its tool: a tool's span runs from there to its result. */
  private readonly calls = new Map<string, { name: string; atMs: number }>();
  /** When the model was last asked, and its answer's last output so far (none yet: still waiting). */
  private askedAtMs: number;
  private answeredAtMs: number | undefined;
  /** Calls of the model's current answer still without a result. */
  private readonly unsettled = new Set<string>();

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
    for (const call of start.calls) this.calls.set(call.toolCallId, { name: call.toolName, atMs: this.span.startMs });
    this.askedAtMs = this.span.startMs;
  }

  event(event: AgentEvent): void {
    const at = Date.now();
    if (MODEL_OUTPUT.has(event.type)) this.answeredAtMs = at;
    switch (event.type) {
      case 'tool_call':
        this.calls.set(event.data.id, { name: event.data.name, atMs: at });
        this.unsettled.add(event.data.id);
        break;
      case 'tool_result':
        this.toolSpan(event.data, at);
        this.unsettled.delete(event.data.id);
        if (this.unsettled.size > 0) break;
        // Every call of the answer has its result: the loop goes back to the model now.
        if (this.answeredAtMs !== undefined) this.modelSpan(this.answeredAtMs);
        this.askedAtMs = at;
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

  /** A tool's run as a child span: from its call (or from the turn's start, for a call this turn settles) to its result. */
  private toolSpan(result: EventOf<'tool_result'>['data'], atMs: number): void {
    const call = this.calls.get(result.id);
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

  /** One model call as a child span, from when the model was asked to its answer's last output (or the failure). */
  private modelSpan(endMs: number, error?: TurnSpanEnd['error']): void {
    const model = this.span.attributes['gen_ai.request.model'];
    this.exporter.add({
      traceId: this.span.traceId,
      spanId: newSpanId(),
      parentSpanId: this.span.spanId,
      name: model === undefined ? 'chat' : `chat ${model}`,
      kind: 'client',
      startMs: this.askedAtMs,
      endMs,
      attributes: defined({
        'gen_ai.operation.name': 'chat',
        ...Object.fromEntries(MODEL_ATTRIBUTES.map((key) => [key, this.span.attributes[key]])),
        'error.type': error?.type,
      }),
      events: [],
      status: error ? { code: 'error', message: error.message } : { code: 'ok' },
    });
    this.answeredAtMs = undefined;
  }

  end(outcome: TurnSpanEnd): void {
    const span = this.span;
    span.endMs = Date.now();
    // The model's last answer; or, when the turn failed with no answer since it was last asked and
    // no tool still running, the call it was waiting on.
    if (this.answeredAtMs !== undefined) this.modelSpan(this.answeredAtMs);
    else if (outcome.error && this.unsettled.size === 0) this.modelSpan(span.endMs, outcome.error);
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
