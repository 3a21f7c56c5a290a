import type { AgentEvent, EventOf } from '../contract/events.ts';

/** Native events that are the model's own output (as opposed to tools' results and the turn's bookkeeping). */
const MODEL_OUTPUT = new Set<AgentEvent['type']>(['message_start', 'message_delta', 'message_end', 'thought_start', 'thought_delta', 'thought_end', 'tool_call']);

export type ToolResult = EventOf<'tool_result'>['data'];

/** What a turn's timeline is told as its model calls and tool runs end. */
export interface TimelineSink {
  /** One model call: from when the model was asked to its answer's last output (or the failure that ended the wait). */
  modelCall(startMs: number, endMs: number, error?: { type: string; message: string }): void;
  /** One tool run: from its call (or the turn's start, for a call the turn settles) to its result. */
  toolRun(result: ToolResult, call: { name: string; atMs: number } | undefined, endMs: number): void;
}

/**
 * A turn's model calls and tool runs, recovered from its events, for the traces and the metrics
 * alike. The events do not mark model calls, so they are recovered as the Vercel stream recovers
 * steps (src/stream/steps.ts): the model is asked when the turn starts, and again once every call
 * of its last answer has its result; that call lasts until its answer's last output. A tool that
 * finishes while the model still streams the same answer splits that call in two.
 */
export class TurnTimeline {
  private readonly sink: TimelineSink;
  /** When each call of this turn was made, and its tool. */
  private readonly calls = new Map<string, { name: string; atMs: number }>();
  /** When the model was last asked, and its answer's last output so far (none yet: still waiting). */
  private askedAtMs: number;
  private answeredAtMs: number | undefined;
  /** Calls of the model's current answer still without a result. */
  private readonly unsettled = new Set<string>();

  /** `settles`: calls of the conversation this turn may settle (a continuation's); their tools run from its start. */
  constructor(startMs: number, settles: ReadonlyArray<{ toolCallId: string; toolName: string }>, sink: TimelineSink) {
    this.sink = sink;
    this.askedAtMs = startMs;
    for (const call of settles) this.calls.set(call.toolCallId, { name: call.toolName, atMs: startMs });
  }

  event(event: AgentEvent, at = Date.now()): void {
    if (MODEL_OUTPUT.has(event.type)) this.answeredAtMs = at;
    if (event.type === 'tool_call') {
      this.calls.set(event.data.id, { name: event.data.name, atMs: at });
      this.unsettled.add(event.data.id);
    } else if (event.type === 'tool_result') {
      this.sink.toolRun(event.data, this.calls.get(event.data.id), at);
      this.unsettled.delete(event.data.id);
      if (this.unsettled.size > 0) return;
      // Every call of the answer has its result: the loop goes back to the model now.
      this.answered();
      this.askedAtMs = at;
    }
  }

  /**
   * The turn's end: its last answer; or, when it failed with no answer since the model was last
   * asked and no tool still running, the call it was waiting on.
   */
  end(endMs: number, error?: { type: string; message: string }): void {
    if (this.answeredAtMs !== undefined) this.answered();
    else if (error && this.unsettled.size === 0) this.sink.modelCall(this.askedAtMs, endMs, error);
  }

  private answered(): void {
    if (this.answeredAtMs === undefined) return;
    this.sink.modelCall(this.askedAtMs, this.answeredAtMs);
    this.answeredAtMs = undefined;
  }
}
