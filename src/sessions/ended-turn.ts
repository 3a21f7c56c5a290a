import type { UIMessage } from 'ai';
import { doneEvent, pendingInteraction, type AgentEvent, type PendingInteraction, type RanRevision } from '../contract/events.ts';
import type { ErrorType } from '../contract/errors.ts';
import type { Message } from '../contract/messages.ts';
import { isToolCallMessage } from '../contract/tool-messages.ts';
import { AppError } from '../errors.ts';
import type { TurnRecord } from '../store/turns.ts';
import type { FoldedTurn } from '../stream/fold.ts';
import { foldEvents } from '../stream/fold.ts';
import { LiveTurn } from './live-turn.ts';

/** The stored revision a recorded turn ran, kept with its request. */
export const ranRevision = (turn: TurnRecord) => turn.request?.revision as RanRevision | undefined;

/**
 * A recorded turn's events, rebuilt from what its record keeps: the folded turn. Each text comes
 * whole, and thoughts are not kept, so they are not told.
 */
export function recordedEvents(turn: TurnRecord): AgentEvent[] {
  const output = (turn.output ?? {}) as { messages?: Message[]; pending_interaction?: PendingInteraction };
  const revision = ranRevision(turn);
  const events: AgentEvent[] = [{ type: 'turn_start', data: { turn_id: turn.id, session_id: turn.session_id, trace_id: turn.trace_id, ...(revision ? { revision } : {}) } }];
  for (const [index, message] of (output.messages ?? []).entries()) {
    if (isToolCallMessage(message)) {
      const call = { toolCallId: message.tool_call_id!, toolName: message.tool_name!, input: message.input };
      events.push({ type: 'tool_call', data: { id: call.toolCallId, name: call.toolName, input: call.input } });
      if (message.approval) events.push({ type: 'interaction_request', data: pendingInteraction(message.approval.id, 'user_approval', call) });
    } else if (message.role === 'tool') {
      events.push({ type: 'tool_result', data: { id: message.tool_call_id!, output: message.content, is_error: message.is_error ?? false } });
    } else if (message.role === 'assistant') {
      const id = `text-${index}`;
      events.push({ type: 'message_start', data: { id } }, { type: 'message_delta', data: { id, delta: message.content } }, { type: 'message_end', data: { id } });
    }
  }
  const pending = output.pending_interaction;
  // An approval was told with its call; a client tool's request has no mark on its call.
  if (pending && pending.kind !== 'user_approval') events.push({ type: 'interaction_request', data: pending });
  if (turn.usage) events.push({ type: 'usage', data: turn.usage });
  const error = turn.error as FoldedTurn['error'] | null;
  if (error) events.push({ type: 'error', data: error });
  events.push(doneEvent(turn.stop_reason ?? (turn.status === 'running' ? 'interrupted' : 'end_turn'), pending));
  return events;
}

/** A turn that has ended, to follow as if it were live: its recorded events, then its end. */
export function endedTurn(turn: TurnRecord, continues?: UIMessage): LiveTurn {
  const live = new LiveTurn({ id: turn.id, projectId: turn.project_id, sessionId: turn.session_id, traceId: turn.trace_id, spanId: turn.span_id, continues, revision: ranRevision(turn) });
  const events = recordedEvents(turn);
  for (const event of events) live.push(event);
  const error = turn.error as FoldedTurn['error'] | null;
  if (error) live.failure = new AppError((error.type ?? 'internal') as ErrorType, error.message, { status: error.code });
  live.finish(foldEvents(events));
  return live;
}
